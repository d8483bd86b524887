"""Deployments: how delivery is going (metrics, heatmaps, every agent's state in every environment),
preview and deploy with a live follow of the job, and the jobs and history behind it all."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

from api import ApiError
from api.agents import Agent
from api.common import MAX_PAGE_SIZE
from api.deployments import (
    AGENT_STATES,
    DEFAULT_ANALYTICS_DAYS,
    DEFAULT_STATUS_PAGE_SIZE,
    FINISHED_JOB_STATUSES,
    JOB_STATUSES,
    MAX_ANALYTICS_DAYS,
    AgentStatus,
    DeploymentJob,
    DeploymentMetrics,
    DeploymentPreview,
    DeploymentRequest,
    FieldChange,
    MetricsFigures,
    StatusMatrix,
)
from api.environments import Environment
from api.resource import body
from components import layout
from components.charts import (
    METRIC_LABELS,
    MIN_RATE_SAMPLE,
    STATE_COLOURS,
    STATE_LABELS,
    STATUS_COLOURS,
    heatmap_figure,
    status_matrix_figure,
    tint,
)
from components.connection import client, current
from components.dates import recent_days
from components.feedback import attempt, load, notify, plain, show_error, show_notice
from components.formatting import ago, duration, short_duration
from components.forms import FormFields, InvalidField
from components.paging import Pager, next_offset, offset_caption
from components.permissions import control
from components.tables import chosen_row, linked_id, row_opener, select

TAB = "tab"
OVERVIEW, DEPLOY, JOBS, HISTORY = "Overview", "Deploy", "Jobs", "History"
PREVIEW = "deploy_preview"
WATCHED = "deploy_watched"
FOLLOWING = "deploy_following"
JOBS_TABLE = "jobs_table"
# Filters are kept in the URL (`bind="query-params"`), so that a view can be linked to and shared.
JOBS_STATUS, JOBS_ENVIRONMENT, JOBS_DAYS = "job_status", "job_env", "job_days"
METRIC, BUCKET, STATES = "metric", "per", "state"
BOUND = "query-params"
HEATMAP = "heatmap_environment"
POLL_SECONDS = 1.0
JOBS_PER_PAGE = 50
HISTORY_PER_PAGE = 100
ALL = "All"
AGENTS, FLEET = "Agents", "A fleet"
FAILED = ["error", "partial"]
BADGE_COLOURS = {
    "complete": "green",
    "partial": "orange",
    "error": "red",
    "running": "blue",
    "pending": "gray",
}
PLOT_CONFIG = {"displayModeBar": False}
TILE_WIDTH = 222
MATRIX_WIDTH, HOURS_WIDTH = 540, 360

connection = current()
orgdeck = client()


# --- Shared pieces -------------------------------------------------------------------------------


def coloured(
    frame: pd.DataFrame, column: str, colours: dict[str, str] = STATUS_COLOURS, *, whole_row: bool = False
) -> Styler:
    """The table with the cells of `column` tinted by their value's colour (whole rows for a diff)."""

    def style(value: object) -> str:
        colour = colours.get(str(value))
        return f"background-color: {tint(colour)}" if colour else ""

    if whole_row:
        return frame.style.apply(lambda row: [style(row[column])] * len(row), axis=1)
    return frame.style.map(style, subset=[column])


def shown(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def version(number: int | None) -> str:
    """`v2`, or nothing: versions are whole numbers, never `2.000000`."""
    return "" if number is None else f"v{number}"


def changes_frame(rows: list[tuple[str, FieldChange]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "Agent": stable_key,
                "Field": change.field,
                "Change": change.kind,
                "Before": shown(change.before),
                "After": shown(change.after),
            }
            for stable_key, change in rows
        ]
    )


def job_duration(job: DeploymentJob) -> float | None:
    if job.started_at is None:
        return None
    return ((job.finished_at or datetime.now(UTC)) - job.started_at).total_seconds()


def results_table(job: DeploymentJob) -> None:
    frame = pd.DataFrame(
        [
            {"Agent": a.stable_key, "Version": version(a.version), "Result": a.status, "Error": a.error or ""}
            for a in job.agents
        ]
    )
    st.dataframe(coloured(frame, "Result"), hide_index=True, width="stretch")


def job_card(job: DeploymentJob, environment_name: str) -> None:
    """A job's state, progress and per-agent results."""
    done = sum(agent.status != "pending" for agent in job.agents)
    failed = sum(agent.status == "error" for agent in job.agents)
    head_col, badge_col = st.columns([5, 1], vertical_alignment="center")
    head_col.markdown(f"**Job `{job.id}`** to **{plain(environment_name)}** · {len(job.agents)} agent(s)")
    badge_col.badge(job.status, color=BADGE_COLOURS[job.status])
    if job.status in FINISHED_JOB_STATUSES:
        summary = job.message or f"{done - failed} of {len(job.agents)} agents deployed"
        {"complete": st.success, "partial": st.warning, "error": st.error}[job.status](plain(summary))
    else:
        waiting = "Waiting for a worker" if job.status == "pending" else "Deploying"
        st.progress(done / max(len(job.agents), 1), text=f"{waiting}… {done} of {len(job.agents)} done")
    started = job.started_at.strftime("%Y-%m-%d %H:%M:%S") if job.started_at else "not yet"
    st.caption(
        f"Created {ago(job.created_at)} · started {started} UTC · ran "
        f"{duration(job_duration(job), none='not yet')} · attempts {job.attempts}"
    )
    if job.change_request is not None:
        asked = job.change_request.requested_by
        approvers = ", ".join(approver.email for approver in job.change_request.approved_by)
        st.caption(
            f"Change request `{job.change_request.id}`: asked by {plain(asked.email or asked.key_name)}, "
            f"approved by {plain(approvers)}"
        )
    results_table(job)


def open_jobs(
    *,
    job_id: str | None = None,
    environment_id: str = ALL,
    statuses: list[str] | None = None,
    days: tuple[date, date] | None = None,
) -> None:
    """Show the Jobs tab with these filters, and the job `job_id` open if given (a callback)."""
    st.session_state[TAB] = JOBS
    st.session_state[JOBS_ENVIRONMENT] = environment_id
    st.session_state[JOBS_STATUS] = statuses or []
    st.session_state[JOBS_DAYS] = days or ()
    if job_id is not None:
        select(JOBS_TABLE, job_id)


# --- Overview ------------------------------------------------------------------------------------


def trend(values: list[float | None], show: Callable[[float], str]) -> str | None:
    """The change from the previous period to the latest one that has a value, signed."""
    known = [value for value in values if value is not None]
    if len(known) < 2:
        return None
    change = known[-1] - known[-2]
    return ("-" if change < 0 else "+") + show(abs(change))


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def per_day(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}/day"


def metric_tiles(metrics: DeploymentMetrics) -> None:
    totals, periods = metrics.totals, metrics.periods
    if metrics.end >= datetime.now(UTC).date():
        # Today is not over: the period that holds it would read as a sudden drop in deployments.
        periods = periods[:-1]
    against = (
        f" The arrow compares the latest complete {metrics.period} with the one before; "
        f"the line, every complete {metrics.period}."
    )
    since = (
        f" Counted from {metrics.counted_from}, the first deployment: days before it are not averaged in."
        if metrics.counted_from > metrics.start
        else ""
    )
    tiles: list[tuple[str, str, Callable[[MetricsFigures], float | None], Callable[[float], str], str]] = [
        (
            "Deployment frequency",
            per_day(totals.deployments_per_day),
            lambda f: f.deployments_per_day,
            per_day,
            f"Successful (complete) jobs per elapsed day: {totals.successes} from {metrics.start} to "
            f"{metrics.end}, over the days that have passed.{since}",
        ),
        (
            "Change failure rate",
            percent(totals.change_failure_rate),
            lambda f: f.change_failure_rate,
            lambda v: f"{v * 100:.1f} pts",
            f"{totals.failures} of {totals.deployments} ended jobs failed in part or in full: the "
            "deployment-failure proxy (a deployment that succeeds and then misbehaves is not seen here).",
        ),
        (
            "Median job duration",
            short_duration(totals.median_duration_seconds),
            lambda f: f.median_duration_seconds,
            short_duration,
            "From a worker starting a job to its end; within 4.4 % of the exact median.",
        ),
        (
            "Median time to restore",
            short_duration(totals.median_time_to_restore_seconds),
            lambda f: f.median_time_to_restore_seconds,
            short_duration,
            "Per incident: from the end of the first failed job of a run to the end of the next "
            "complete job in the same environment; within 4.4 % of the exact median.",
        ),
    ]
    # Tiles of a fixed width that wrap: four abreast in a wide window, two by two in a narrow one.
    row = st.container(horizontal=True, gap="small")
    for label, value, pick, show, help_text in tiles:
        series = [pick(period) for period in periods]
        row.metric(
            label,
            value,
            delta=trend(series, show),
            # More deployments is good news; more failures, slower jobs and restores are not.
            delta_color="normal" if label == "Deployment frequency" else "inverse",
            chart_data=[v for v in series if v is not None] or None,
            chart_type="area",
            border=True,
            help=help_text + against,
            width=TILE_WIDTH,
        )
    counted = st.container(horizontal=True, gap="small")
    days = (metrics.start, metrics.end)
    for label, statuses in (
        (f"Complete jobs ({totals.successes:,})", ["complete"]),
        (f"Failed jobs ({totals.failures:,})", FAILED),
    ):
        counted.button(
            label,
            icon=":material/list:",
            type="tertiary",
            on_click=open_jobs,
            kwargs={"statuses": statuses, "days": days},
            help="Open the jobs these figures count in the Jobs tab.",
        )


def open_cell() -> None:
    """The heatmap's callback: a click on a cell opens its jobs in the Jobs tab."""
    points = st.session_state[HEATMAP]["selection"]["points"]
    if not points:
        return
    environment_id, first = points[0]["customdata"]
    day = date.fromisoformat(first)
    last = day + timedelta(days=6) if st.session_state.get(BUCKET, "day") == "week" else day
    failed_only = st.session_state.get(METRIC, "count") != "count"
    open_jobs(environment_id=environment_id, statuses=FAILED if failed_only else [], days=(day, last))


def heatmap_legend(metric: str) -> None:
    rate = (
        f" · darker grey: fewer than {MIN_RATE_SAMPLE} jobs, too few for a rate"
        if metric == "failure_rate"
        else ""
    )
    scale = "green: none failed, to red" if metric != "count" else "light to dark blue: fewer to more jobs"
    st.caption(
        f"Light grey: no jobs{rate} · {scale}. Hover a cell for its jobs; click it to open them in **Jobs**."
    )


def status_section(matrix: StatusMatrix, pager: Pager) -> None:
    counts = " · ".join(f"{STATE_LABELS[state]} **{matrix.counts.get(state, 0)}**" for state in AGENT_STATES)
    st.markdown(f"**Agents by environment** &nbsp; {counts}")
    if not matrix.items:
        st.info("No agents to show yet: create and snapshot agents on the Agents page.")
        return
    st.plotly_chart(status_matrix_figure(matrix), width="stretch", config=PLOT_CONFIG)
    if matrix.total_agents > matrix.limit:
        shown_agents = len({item.stable_key for item in matrix.items})
        pager.controls(
            next_offset(matrix.offset, shown_agents, matrix.total_agents),
            offset_caption(matrix.offset, shown_agents, matrix.total_agents, "agents"),
            labels=("Previous", "Next"),
        )
    attention = [item for item in matrix.items if item.state in ("drifted", "stale", "error")]
    if not attention:
        return
    names = {environment.id: environment.name for environment in matrix.environments}
    with st.expander(f"What needs attention ({len(attention)})", icon=":material/troubleshoot:"):
        frame = pd.DataFrame(
            [
                {
                    "Agent": item.stable_key,
                    "Environment": names.get(item.environment_id, item.environment_id),
                    "State": item.state,
                    "Running": version(item.deployed_version),
                    "Newest": version(item.latest_version),
                    "Since": ago(item.since, never=""),
                    "Why": item.error or ", ".join(change.field for change in item.drift) or waiting(item),
                }
                for item in attention
            ]
        )
        st.dataframe(coloured(frame, "State", STATE_COLOURS), hide_index=True, width="stretch")
        drifted = [item for item in attention if item.drift]
        if drifted:
            labels = {f"{i.stable_key} in {names.get(i.environment_id, '?')}": i for i in drifted}
            chosen = labels[st.selectbox("Drift of", list(labels), key="drift_choice")]
            drift = changes_frame([(chosen.stable_key, change) for change in chosen.drift])
            st.dataframe(coloured(drift, "Change", whole_row=True), hide_index=True, width="stretch")
            st.caption("Drift is flagged, never fixed silently: redeploy from the Deploy tab to resolve it.")


def waiting(item: AgentStatus) -> str:
    """What newer than the running config has waited: `version 2 → 3`, `promptPins.system 1.2.0 → 1.3.0`."""
    return ", ".join(f"{change.field} {change.before} → {change.after}" for change in item.newer)


def stale_setting() -> None:
    settings = load("read the deployment settings", orgdeck.deployments.settings)
    with st.popover(f"Stale after {settings.stale_after_days} days", icon=":material/schedule:"):
        days = st.number_input(
            "Days a newer version may wait undeployed",
            min_value=1,
            max_value=365,
            value=settings.stale_after_days,
            key="stale_after_days",
        )
        if st.button("Save", key="save_stale_after", **control("updateDeploymentSettings")):
            try:
                orgdeck.deployments.update_settings(stale_after_days=int(days))
            except ApiError as error:
                show_error(error, "save the stale threshold")
            else:
                notify(f"Pairs are now stale after **{int(days)}** days.")


def overview_tab() -> None:
    controls = st.container(horizontal=True, vertical_alignment="bottom", gap="medium")
    with controls:
        today = datetime.now(UTC).date()
        start, end = recent_days(
            "Dates", DEFAULT_ANALYTICS_DAYS, key="dates", at_most=MAX_ANALYTICS_DAYS, width=260, bind=True
        ) or (today, today)
    metric = controls.segmented_control(
        "Heatmap shows",
        list(METRIC_LABELS),
        format_func=METRIC_LABELS.get,
        default="count",
        required=True,
        key=METRIC,
        bind=BOUND,
    )
    bucket = controls.segmented_control(
        "Per", ["day", "week"], default="day", required=True, key=BUCKET, bind=BOUND
    )
    metrics = attempt("load the delivery metrics", lambda: orgdeck.deployments.metrics(start=start, end=end))
    if metrics is not None and metrics.totals.deployments == 0:
        st.info(
            "No deployments between these dates. Preview and deploy agents from the **Deploy** tab; "
            "the heatmaps and metrics fill in as jobs run."
        )
    elif metrics is not None:
        metric_tiles(metrics)
        by_day = attempt(
            "load the heatmap",
            lambda: orgdeck.deployments.heatmap(
                group_by="environment", bucket=bucket, metric=metric, start=start, end=end
            ),
        )
        if by_day is not None:
            st.markdown(f"**{METRIC_LABELS[metric]} per environment and {bucket}**")
            st.plotly_chart(
                heatmap_figure(by_day, clickable=True),
                width="stretch",
                config=PLOT_CONFIG,
                key=HEATMAP,
                on_select=open_cell,
                selection_mode="points",
            )
            heatmap_legend(metric)
    # Side by side in a wide window, one above the other in a narrow one.
    pair = st.container(horizontal=True, gap="large")
    matrix_col, hours_col = pair.container(width=MATRIX_WIDTH), pair.container(width=HOURS_WIDTH)
    with matrix_col:
        states = st.pills(
            "Only agents with pairs that are",
            AGENT_STATES,
            selection_mode="multi",
            format_func=STATE_LABELS.get,
            key=STATES,
            bind=BOUND,
        )
        pager = Pager("matrix_pager", tuple(states))
        matrix = attempt(
            "load the status matrix",
            lambda: orgdeck.deployments.status(
                state=states or None, limit=DEFAULT_STATUS_PAGE_SIZE, offset=pager.offset
            ),
        )
        if matrix is not None:
            status_section(matrix, pager)
        stale_setting()
    with hours_col:
        if metrics is not None and metrics.totals.deployments:
            hours = attempt(
                "load the heatmap",
                lambda: orgdeck.deployments.heatmap(
                    group_by="weekday_hour", metric=metric, start=start, end=end
                ),
            )
            if hours is not None:
                st.markdown(f"**{METRIC_LABELS[metric]} by weekday and hour (UTC)**")
                st.plotly_chart(
                    heatmap_figure(hours, height=340),
                    width="stretch",
                    config=PLOT_CONFIG,
                    key="heatmap_hours",
                )


# --- Deploy --------------------------------------------------------------------------------------


def parse_versions(text: str) -> dict[str, int] | None:
    """`support-triage=2, kb-answerer=1` → {"support-triage": 2, "kb-answerer": 1}."""
    versions = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, number = part.partition("=")
        if not number.strip().isdigit():
            raise InvalidField(
                "agentVersions", f"write each as key=number, like support-triage=2 (not '{part}')"
            )
        versions[key.strip()] = int(number)
    return versions or None


def parse_config(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidField(
            "agentProviderConfig", f"not valid JSON: {error.msg} (line {error.lineno})"
        ) from error
    if not isinstance(value, dict):
        raise InvalidField("agentProviderConfig", 'must be a JSON object, like {"temperature": 0.1}')
    return value


def overrides(fields: FormFields, tool_keys: list[str]) -> dict[str, Any]:
    """The override inputs, as typed; parsed when the preview is asked for."""
    with st.expander("Overrides (optional)", icon=":material/tune:"):
        model_col, prompt_col, version_col = layout.fields("deploy_overrides", 3)
        model = fields.text_input("model", key="deploy_model", where=model_col)
        prompt_name = fields.text_input("promptName", key="deploy_prompt", where=prompt_col)
        pinned = fields.text_input("version", key="deploy_prompt_version", where=version_col)
        tools_col, versions_col = layout.fields("deploy_tools_versions", 2)
        tool_refs = tools_col.multiselect("Tools", tool_keys, key="deploy_tools")
        fields.slot("toolRefs", where=tools_col)
        versions = fields.text_input(
            "agentVersions",
            key="deploy_versions",
            where=versions_col,
            label="Versions (roll back)",
            help="Deploy these versions instead of the newest, as key=number, comma-separated.",
        )
        provider_config = fields.text_area(
            "agentProviderConfig",
            key="deploy_provider_config",
            label="Provider config (JSON object, merged over each version's)",
            height=80,
        )
    return {
        "model": model.strip() or None,
        "prompt_name": prompt_name.strip() or None,
        "version": pinned.strip() or None,
        "tool_refs": tool_refs or None,
        "agent_versions": versions,
        "agent_provider_config": provider_config,
    }


def preview_table(preview: DeploymentPreview) -> None:
    rows = []
    for agent in preview.agents:
        before = f"v{agent.current_version}" if agent.current_version else "not deployed"
        base = {
            "Agent": agent.stable_key,
            "Agent status": agent.status,
            "Version": f"{before} → v{agent.target_version}",
        }
        if not agent.changes:
            rows.append(base | {"Field": "", "Change": "unchanged", "Before": "", "After": ""})
        for change in agent.changes:
            rows.append(
                base
                | {
                    "Field": change.field,
                    "Change": change.kind,
                    "Before": shown(change.before),
                    "After": shown(change.after),
                }
            )
    st.dataframe(coloured(pd.DataFrame(rows), "Change", whole_row=True), hide_index=True, width="stretch")


def preview_warnings(preview: DeploymentPreview, environment_name: str) -> bool:
    """Say what would stop the deployment; True when something would."""
    for warning in preview.warnings:
        if warning.code == "signing_key_missing":
            st.warning(
                f"**{plain(environment_name)} has no signing key yet.** It is a webhook target: each "
                "deployment is sent to it signed, so that the receiver can trust it. Create the key on "
                "the Environments page, give it to the receiver, then deploy.",
                icon=":material/key_off:",
            )
            st.page_link("pages/environments.py", label="Create the signing key", icon=":material/key:")
        else:
            st.warning(plain(warning.message), icon=":material/warning:")
    return bool(preview.warnings)


def request_deployment(request: dict[str, Any], environment_name: str) -> None:
    """A protected environment's Deploy: the previewed deployment opened as a change request."""
    reason = st.text_input("Reason", key="deploy_reason", placeholder="What this release brings")
    if st.button(
        f"Request deployment to {environment_name}",
        type="primary",
        icon=":material/approval:",
        key="deploy_request",
        **control("openChangeRequest", at_least="operator", disabled=not reason.strip()),
    ):
        payload = body(DeploymentRequest, org_slug=connection.org_slug, **request)
        try:
            opened = orgdeck.change_requests.open("deployment", payload, reason.strip())
        except ApiError as error:
            show_error(error, "request the deployment", "deployment")
        else:
            st.session_state.pop(PREVIEW, None)
            notify(
                f"Requested the deployment to **{plain(environment_name)}** ({opened.id}): it runs once "
                f"{opened.required_approvals} other member(s) approve it on the Changes page."
            )


def show_preview(stored: dict[str, Any], environment_name: str, *, protected: bool) -> None:
    preview: DeploymentPreview = stored["preview"]
    request: dict[str, Any] = stored["request"]
    counts = Counter(agent.status for agent in preview.agents)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("added", "changed", "unchanged") if counts[s])
    st.markdown(f"#### Preview: {len(preview.agents)} agent(s) to **{plain(environment_name)}** ({summary})")
    preview_table(preview)
    blocked = preview_warnings(preview, environment_name)
    if not preview.has_changes:
        st.info("Nothing would change: every agent already runs exactly this there. Deploying redeploys it.")
    if protected:
        st.info(
            f"**{plain(environment_name)} is protected:** a deployment there runs once other members "
            "approve it.",
            icon=":material/lock:",
        )
        request_deployment(request, environment_name)
    actions = st.container(horizontal=True)
    if not protected and actions.button(
        f"Deploy to {environment_name}",
        type="primary",
        icon=":material/rocket_launch:",
        key="deploy_go",
        **control("deploy", disabled=blocked),
    ):
        try:
            job = orgdeck.deployments.deploy(**request)
        except ApiError as error:
            show_error(error, "start the deployment", "deployment")
        else:
            st.session_state.pop(PREVIEW, None)
            st.session_state[WATCHED] = job.id
            st.session_state[FOLLOWING] = job.id
            st.rerun()
    if actions.button("Discard preview", key="deploy_discard"):
        st.session_state.pop(PREVIEW, None)
        st.rerun()


def follow(job_id: str, environment_names: dict[str, str]) -> None:
    """The deployment started from this tab, redrawn every POLL_SECONDS until it ends."""
    try:
        job = orgdeck.deployments.job(job_id)
    except ApiError as error:
        st.session_state.pop(FOLLOWING, None)
        show_error(error, "follow the deployment")
        return
    job_card(job, environment_names.get(job.environment_id, job.environment_id))
    if job.status in FINISHED_JOB_STATUSES and st.session_state.get(FOLLOWING) == job_id:
        # A full run redraws the fragment without its timer: polling stops with the job.
        st.session_state.pop(FOLLOWING)
        st.rerun()


def deploy_tab(environments: list[Environment]) -> None:
    names = {environment.id: environment.name for environment in environments}
    webhooks = {environment.id for environment in environments if environment.target == "webhook"}
    protected = {environment.id for environment in environments if environment.protected}
    watched = st.session_state.get(WATCHED)
    if watched:
        polling = POLL_SECONDS if st.session_state.get(FOLLOWING) == watched else None
        with st.container(border=True):
            st.fragment(follow, run_every=polling)(watched, names)
            # Outside the fragment: switching tabs needs a run of the whole page.
            st.button(
                "Open in Jobs", icon=":material/open_in_new:", on_click=open_jobs, kwargs={"job_id": watched}
            )
        st.markdown("**New deployment**")
    agents: list[Agent] = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
    versioned = {agent.stable_key: agent for agent in agents if agent.latest_version is not None}
    if not versioned:
        st.info("No agent has a version yet: snapshot one on the **Agents** page, then deploy it here.")
        return
    fleets = load("list fleets", lambda: orgdeck.fleets.list(limit=MAX_PAGE_SIZE)).items
    tools = load("list tools", lambda: orgdeck.tools.list(limit=MAX_PAGE_SIZE)).items
    fields = FormFields("deployment")
    environment_col, scope_col = layout.fields("deploy_target", 2)
    environment_id = environment_col.selectbox(
        "Environment",
        list(names),
        format_func=lambda e: f"{names[e]} (webhook)" if e in webhooks else names[e],
        key="deploy_environment",
    )
    fields.slot("environmentId", where=environment_col)
    scope = scope_col.segmented_control(
        "Deploy", [AGENTS, FLEET], default=AGENTS, required=True, key="deploy_scope"
    )
    fleet_id = None
    if scope == AGENTS:
        chosen = st.multiselect(
            "Agents",
            list(versioned),
            format_func=lambda key: f"{versioned[key].name} · v{versioned[key].latest_version}",
            placeholder="Choose agents",
            key="deploy_agents",
        )
    else:
        fleet_names = {fleet.id: f"{fleet.name} ({fleet.agent_count} agents)" for fleet in fleets}
        fleet_id = st.selectbox("Fleet", list(fleet_names), format_func=fleet_names.get, key="deploy_fleet")
        chosen = []
    fields.slot("agentStableKeys")
    typed = overrides(fields, [tool.tool_key for tool in tools])
    if st.button("Preview changes", icon=":material/difference:", key="deploy_preview_button"):
        ask_preview(fields, environment_id, chosen, fleet_id, typed)
    stored = st.session_state.get(PREVIEW)
    if stored:
        target = stored["request"]["environment_id"]
        show_preview(stored, names.get(target, "?"), protected=target in protected)


def ask_preview(
    fields: FormFields,
    environment_id: str | None,
    chosen: list[str],
    fleet_id: str | None,
    typed: dict[str, Any],
) -> None:
    """Preview what the form describes and keep it, so that Deploy deploys exactly what was shown."""
    st.session_state.pop(PREVIEW, None)
    try:
        if fleet_id is not None:
            chosen = [agent.stable_key for agent in orgdeck.fleets.get(fleet_id).agents]
            if not chosen:
                raise InvalidField(
                    "agentStableKeys", "this fleet has no agents yet: add some on the Agents page"
                )
        if not chosen:
            raise InvalidField("agentStableKeys", "choose at least one agent, or a fleet")
        request = typed | {
            "environment_id": environment_id,
            "agent_stable_keys": chosen,
            "agent_versions": parse_versions(typed["agent_versions"]),
            "agent_provider_config": parse_config(typed["agent_provider_config"]),
        }
        preview = orgdeck.deployments.preview(**request)
    except (InvalidField, ApiError) as error:
        fields.show(error, "preview the deployment")
    else:
        st.session_state[PREVIEW] = {"request": request, "preview": preview}


# --- Jobs ----------------------------------------------------------------------------------------


def jobs_tab(environment_names: dict[str, str]) -> None:
    status_col, environment_col, days_col = layout.fields("job_filters", 3)
    statuses = status_col.multiselect(
        "Status", list(JOB_STATUSES), placeholder="Any", key=JOBS_STATUS, bind=BOUND
    )
    environment = environment_col.selectbox(
        "Environment",
        [ALL, *environment_names],
        format_func=lambda e: environment_names.get(e, e),
        key=JOBS_ENVIRONMENT,
        bind=BOUND,
    )
    today = datetime.now(UTC).date()
    picked = days_col.date_input(
        "Created (UTC)",
        value=[],
        max_value=today,
        format="YYYY-MM-DD",
        key=JOBS_DAYS,
        help="Any day when empty.",
        bind=BOUND,
    )
    days = (picked[0], picked[-1]) if picked else (None, None)
    # New filters start again from the newest page.
    pager = Pager("jobs_pager", (tuple(statuses), environment, days))
    page = load(
        "list deployment jobs",
        lambda: orgdeck.deployments.jobs(
            status=statuses or None,
            environment_id=None if environment == ALL else environment,
            start=days[0],
            end=days[1],
            limit=JOBS_PER_PAGE,
            cursor=pager.start,
        ),
    )
    if not page.items:
        filtered = statuses or environment != ALL or picked
        st.info(
            "No job matches these filters."
            if filtered
            else "No deployment jobs yet: start one from the **Deploy** tab."
        )
        return
    frame = pd.DataFrame(
        [
            {
                "Created": job.created_at,
                "Environment": environment_names.get(job.environment_id, job.environment_id),
                "Status": job.status,
                "Agents": len(job.agents),
                "Failed": sum(agent.status == "error" for agent in job.agents),
                "Duration": duration(job_duration(job), none=""),
                "Message": job.message or "",
                "Job": job.id,
            }
            for job in page.items
        ]
    )
    chosen = chosen_row(
        coloured(frame, "Status"),
        [job.id for job in page.items],
        key=JOBS_TABLE,
        column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    pager.controls(page.next_cursor, f"Page {pager.number}, newest first")
    st.divider()
    job = load("load the job", lambda: orgdeck.deployments.job(chosen))
    job_card(job, environment_names.get(job.environment_id, job.environment_id))


# --- History -------------------------------------------------------------------------------------


def history_tab(environment_names: dict[str, str]) -> None:
    agents = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
    agent_col, environment_col, result_col, dates_col = layout.fields("history_filters", 4)
    agent = agent_col.selectbox(
        "Agent", [ALL, *(a.stable_key for a in agents)], key="history_agent", bind=BOUND
    )
    environment = environment_col.selectbox(
        "Environment",
        [ALL, *environment_names],
        format_func=lambda e: environment_names.get(e, e),
        key="history_env",
        bind=BOUND,
    )
    results = result_col.multiselect(
        "Result", ["complete", "error", "pending"], placeholder="Any", key="history_result", bind=BOUND
    )
    with dates_col:
        picked = recent_days("Dates", DEFAULT_ANALYTICS_DAYS, key="history_dates", bind=True)
        start, end = picked or (None, None)
    pager = Pager("history_pager", (agent, environment, results, start, end))
    page = load(
        "load the deployment history",
        lambda: orgdeck.deployments.history(
            agent=None if agent == ALL else agent,
            environment_id=None if environment == ALL else environment,
            status=results or None,
            start=start,
            end=end,
            limit=HISTORY_PER_PAGE,
            offset=pager.offset,
        ),
    )
    if not page.items:
        st.info("No deployment matches these filters.")
        return
    frame = pd.DataFrame(
        [
            {
                "When": entry.created_at,
                "Agent": entry.stable_key,
                "Environment": entry.environment_name,
                "Version": version(entry.version),
                "Result": entry.status,
                "Job status": entry.job_status,
                "Error": entry.error or "",
                "Job": entry.job_id,
            }
            for entry in page.items
        ]
    )
    entries = {entry.job_id: entry for entry in page.items}

    def open_job(job_id: str) -> None:
        # Its environment and day: the Jobs tab lists it however long ago it ran.
        entry = entries[job_id]
        day = entry.created_at.astimezone(UTC).date()
        open_jobs(job_id=job_id, environment_id=entry.environment_id, days=(day, day))

    st.caption("Click a row to open its job.")
    row_opener(
        coloured(frame, "Result"),
        [entry.job_id for entry in page.items],
        key="history_table",
        on_open=open_job,
        column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    total = page.total or 0
    pager.controls(
        next_offset(pager.offset, len(page.items), total),
        offset_caption(pager.offset, len(page.items), total, "agent deployments"),
    )


# --- The page ------------------------------------------------------------------------------------

st.title("Deployments")
st.caption(
    "How delivery is going, what runs where and what has drifted from it; preview a deployment "
    "field by field, deploy it and follow the job to its end."
)
show_notice()

environments: list[Environment] = load(
    "list environments", lambda: orgdeck.environments.list(limit=MAX_PAGE_SIZE)
).items
if not environments:
    st.info(
        "No environments yet. Create one on the **Environments** page (a builtin target needs "
        "nothing else), then deploy agents into it here."
    )
    st.stop()
environment_names = {environment.id: environment.name for environment in environments}

linked_job = linked_id()
if linked_job:
    # A link to a job (the Activity page's): the Jobs tab, filtered to the job's environment and day.
    opened = attempt("open the job", lambda: orgdeck.deployments.job(linked_job))
    if opened:
        opened_day = opened.created_at.astimezone(UTC).date()
        open_jobs(job_id=opened.id, environment_id=opened.environment_id, days=(opened_day, opened_day))
overview, deploy, jobs, history = st.tabs(
    [OVERVIEW, DEPLOY, JOBS, HISTORY], key=TAB, on_change="rerun", bind=BOUND
)
# Only the open tab runs: each one's calls are made when a person looks at it.
with overview:
    if overview.open:
        overview_tab()
with deploy:
    if deploy.open:
        deploy_tab(environments)
with jobs:
    if jobs.open:
        jobs_tab(environment_names)
with history:
    if history.open:
        history_tab(environment_names)
