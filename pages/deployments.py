"""Deployments: how delivery is going (metrics, heatmaps, every agent's state in every environment),
preview and deploy with a live follow of the job, and the jobs and history behind it all."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
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
    AgentStatus,
    DeploymentJob,
    DeploymentMetrics,
    DeploymentPreview,
    FieldChange,
    MetricsFigures,
    StatusMatrix,
)
from api.environments import Environment
from components.charts import (
    METRIC_LABELS,
    STATE_COLOURS,
    STATE_LABELS,
    STATUS_COLOURS,
    heatmap_figure,
    status_matrix_figure,
    tint,
)
from components.connection import client, current
from components.dates import recent_days
from components.feedback import load, notify, show_error, show_notice
from components.formatting import ago, duration
from components.paging import paging_position

TAB = "deployments_tab"
OVERVIEW, DEPLOY, JOBS, HISTORY = "Overview", "Deploy", "Jobs", "History"
PREVIEW = "deploy_preview"
WATCHED = "deploy_watched"
FOLLOWING = "deploy_following"
JOB_CHOICE = "job_choice"
JOB_CURSORS = "job_cursors"
HISTORY_OFFSET = "history_offset"
MATRIX_PAGE = "matrix_page"
POLL_SECONDS = 1.0
JOBS_PER_PAGE = 50
HISTORY_PER_PAGE = 100
ALL = "All"
AGENTS, FLEET = "Agents", "A fleet"
BADGE_COLOURS = {
    "complete": "green",
    "partial": "orange",
    "error": "red",
    "running": "blue",
    "pending": "gray",
}
PLOT_CONFIG = {"displayModeBar": False}

connection = current()
orgdeck = client()


class InvalidField(ValueError):
    """A form field the page could not turn into what the API expects."""


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
            {"Agent": a.stable_key, "Version": a.version, "Result": a.status, "Error": a.error or ""}
            for a in job.agents
        ]
    )
    st.dataframe(coloured(frame, "Result"), hide_index=True, width="stretch")


def job_card(job: DeploymentJob, environment_name: str) -> None:
    """A job's state, progress and per-agent results."""
    done = sum(agent.status != "pending" for agent in job.agents)
    failed = sum(agent.status == "error" for agent in job.agents)
    head_col, badge_col = st.columns([5, 1], vertical_alignment="center")
    head_col.markdown(f"**Job `{job.id}`** to **{environment_name}** · {len(job.agents)} agent(s)")
    badge_col.badge(job.status, color=BADGE_COLOURS[job.status])
    if job.status in FINISHED_JOB_STATUSES:
        summary = job.message or f"{done - failed} of {len(job.agents)} agents deployed"
        {"complete": st.success, "partial": st.warning, "error": st.error}[job.status](summary)
    else:
        waiting = "Waiting for a worker" if job.status == "pending" else "Deploying"
        st.progress(done / max(len(job.agents), 1), text=f"{waiting}… {done} of {len(job.agents)} done")
    st.caption(
        f"Created {ago(job.created_at)} · ran {duration(job_duration(job), none='not yet')} · "
        f"attempts {job.attempts}"
    )
    results_table(job)


# --- Overview ------------------------------------------------------------------------------------


def pick_dates() -> tuple[date, date]:
    today = datetime.now(UTC).date()
    return recent_days("Dates", DEFAULT_ANALYTICS_DAYS, key="overview_dates") or (today, today)


def trend(values: list[float | None], show: Callable[[float], str]) -> str | None:
    """The change from the previous period to the latest one that has a value, signed."""
    known = [value for value in values if value is not None]
    if len(known) < 2:
        return None
    change = known[-1] - known[-2]
    return ("-" if change < 0 else "+") + show(abs(change))


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def metric_tiles(metrics: DeploymentMetrics) -> None:
    totals, periods = metrics.totals, metrics.periods
    if metrics.end >= datetime.now(UTC).date():
        # Today is not over: the period that holds it would read as a sudden drop in deployments.
        periods = periods[:-1]
    against = (
        f" The arrow compares the latest complete {metrics.period} with the one before; "
        f"the line, every complete {metrics.period}."
    )
    tiles: list[tuple[str, str, Callable[[MetricsFigures], float | None], Callable[[float], str], str]] = [
        (
            "Deployment frequency",
            f"{totals.deployments_per_day:.1f} / day",
            lambda f: f.deployments_per_day,
            lambda v: f"{v:.1f} / day",
            f"{totals.deployments} jobs from {metrics.start} to {metrics.end}.",
        ),
        (
            "Change failure rate",
            percent(totals.change_failure_rate),
            lambda f: f.change_failure_rate,
            lambda v: f"{v * 100:.1f} pts",
            f"{totals.failures} of {totals.deployments} jobs failed in part or in full.",
        ),
        (
            "Median job duration",
            duration(totals.median_duration_seconds),
            lambda f: f.median_duration_seconds,
            duration,
            "From a worker starting a job to its end.",
        ),
        (
            "Median time to restore",
            duration(totals.median_time_to_restore_seconds),
            lambda f: f.median_time_to_restore_seconds,
            duration,
            "From a failed job to the next complete one in the same environment.",
        ),
    ]
    for column, (label, value, pick, show, help_text) in zip(st.columns(4), tiles, strict=True):
        series = [pick(period) for period in periods]
        column.metric(
            label,
            value,
            delta=trend(series, show),
            # More deployments is good news; more failures, slower jobs and restores are not.
            delta_color="normal" if label == "Deployment frequency" else "inverse",
            chart_data=[v for v in series if v is not None] or None,
            chart_type="area",
            border=True,
            help=help_text + against,
        )


def status_section(matrix: StatusMatrix) -> None:
    counts = " · ".join(f"{STATE_LABELS[state]} **{matrix.counts.get(state, 0)}**" for state in AGENT_STATES)
    st.markdown(f"**Agents by environment** &nbsp; {counts}")
    if not matrix.items:
        st.info("No agents to show yet: create and snapshot agents on the Agents page.")
        return
    st.plotly_chart(status_matrix_figure(matrix), width="stretch", config=PLOT_CONFIG)
    if matrix.total_agents > matrix.limit:
        pages = -(-matrix.total_agents // matrix.limit)
        st.number_input(
            f"Page of {pages} ({matrix.total_agents} agents, {matrix.limit} a page)",
            min_value=1,
            max_value=pages,
            key=MATRIX_PAGE,
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
                    "Running": item.deployed_version,
                    "Newest": item.latest_version,
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
        if st.button("Save", key="save_stale_after"):
            try:
                orgdeck.deployments.update_settings(stale_after_days=int(days))
            except ApiError as error:
                show_error(error, "save the stale threshold")
            else:
                notify(f"Pairs are now stale after **{int(days)}** days.")


def overview_tab() -> None:
    dates_col, metric_col, bucket_col = st.columns([2, 3, 2], vertical_alignment="bottom")
    with dates_col:
        start, end = pick_dates()
    metric = metric_col.segmented_control(
        "Heatmap shows",
        list(METRIC_LABELS),
        format_func=METRIC_LABELS.get,
        default="count",
        required=True,
        key="heatmap_metric",
    )
    bucket = bucket_col.segmented_control(
        "Per", ["day", "week"], default="day", required=True, key="heatmap_bucket"
    )
    metrics = load("load the delivery metrics", lambda: orgdeck.deployments.metrics(start=start, end=end))
    if metrics.totals.deployments == 0:
        st.info(
            "No deployments between these dates. Preview and deploy agents from the **Deploy** tab; "
            "the heatmaps and metrics fill in as jobs run."
        )
    else:
        metric_tiles(metrics)
        by_day = load(
            "load the heatmap",
            lambda: orgdeck.deployments.heatmap(
                group_by="environment", bucket=bucket, metric=metric, start=start, end=end
            ),
        )
        st.markdown(f"**{METRIC_LABELS[metric]} per environment and {bucket}**")
        st.plotly_chart(
            heatmap_figure(by_day), width="stretch", config=PLOT_CONFIG, key="heatmap_environment"
        )
    matrix_col, hours_col = st.columns([3, 2], gap="large")
    with matrix_col:
        offset = (st.session_state.get(MATRIX_PAGE, 1) - 1) * DEFAULT_STATUS_PAGE_SIZE
        matrix = load("load the status matrix", lambda: orgdeck.deployments.status(offset=offset))
        status_section(matrix)
        stale_setting()
    with hours_col:
        if metrics.totals.deployments:
            hours = load(
                "load the heatmap",
                lambda: orgdeck.deployments.heatmap(
                    group_by="weekday_hour", metric=metric, start=start, end=end
                ),
            )
            st.markdown(f"**{METRIC_LABELS[metric]} by weekday and hour (UTC)**")
            st.plotly_chart(
                heatmap_figure(hours, height=330), width="stretch", config=PLOT_CONFIG, key="heatmap_hours"
            )


# --- Deploy --------------------------------------------------------------------------------------


def parse_versions(text: str) -> dict[str, int] | None:
    """`support-triage=2, kb-answerer=1` → {"support-triage": 2, "kb-answerer": 1}."""
    versions = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, number = part.partition("=")
        if not number.strip().isdigit():
            raise InvalidField(f"Versions: write each as key=number, like support-triage=2 (got '{part}')")
        versions[key.strip()] = int(number)
    return versions or None


def parse_config(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidField(f"Provider config is not valid JSON: {error.msg} (line {error.lineno})") from error
    if not isinstance(value, dict):
        raise InvalidField('Provider config must be a JSON object, like {"temperature": 0.1}')
    return value


def overrides(tool_keys: list[str]) -> dict[str, Any]:
    """The override inputs, as typed; parsed when the preview is asked for."""
    with st.expander("Overrides (optional)", icon=":material/tune:"):
        model_col, prompt_col, version_col = st.columns([2, 2, 1])
        model = model_col.text_input("Model", placeholder="e.g. gpt-4o", key="deploy_model")
        prompt_name = prompt_col.text_input(
            "Pin prompt", placeholder="e.g. system", help="A prompt reference name.", key="deploy_prompt"
        )
        version = version_col.text_input("to version", placeholder="e.g. 3", key="deploy_prompt_version")
        tools_col, versions_col = st.columns(2)
        tool_refs = tools_col.multiselect("Tools", tool_keys, key="deploy_tools")
        versions = versions_col.text_input(
            "Versions (roll back)",
            placeholder="support-triage=2",
            help="Deploy these versions instead of the newest, as key=number, comma-separated.",
            key="deploy_versions",
        )
        provider_config = st.text_area(
            "Provider config (JSON object, merged over each version's)",
            placeholder='{"temperature": 0.1}',
            height=80,
            key="deploy_provider_config",
        )
    return {
        "model": model.strip() or None,
        "prompt_name": prompt_name.strip() or None,
        "version": version.strip() or None,
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


def show_preview(stored: dict[str, Any], environment_name: str) -> None:
    preview: DeploymentPreview = stored["preview"]
    request: dict[str, Any] = stored["request"]
    counts = Counter(agent.status for agent in preview.agents)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("added", "changed", "unchanged") if counts[s])
    st.markdown(f"#### Preview: {len(preview.agents)} agent(s) to **{environment_name}** ({summary})")
    preview_table(preview)
    if not preview.has_changes:
        st.info("Nothing would change: every agent already runs exactly this there. Deploying redeploys it.")
    actions = st.container(horizontal=True)
    if actions.button(
        f"Deploy to {environment_name}", type="primary", icon=":material/rocket_launch:", key="deploy_go"
    ):
        try:
            job = orgdeck.deployments.deploy(**request)
        except ApiError as error:
            show_error(error, "start the deployment")
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


def open_job(job_id: str) -> None:
    st.session_state[TAB] = JOBS
    st.session_state[JOB_CHOICE] = job_id


def deploy_tab(environments: list[Environment]) -> None:
    names = {environment.id: environment.name for environment in environments}
    watched = st.session_state.get(WATCHED)
    if watched:
        polling = POLL_SECONDS if st.session_state.get(FOLLOWING) == watched else None
        with st.container(border=True):
            st.fragment(follow, run_every=polling)(watched, names)
            # Outside the fragment: switching tabs needs a run of the whole page.
            st.button("Open in Jobs", icon=":material/open_in_new:", on_click=open_job, args=(watched,))
        st.markdown("**New deployment**")
    agents: list[Agent] = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
    versioned = {agent.stable_key: agent for agent in agents if agent.latest_version is not None}
    if not versioned:
        st.info("No agent has a version yet: snapshot one on the **Agents** page, then deploy it here.")
        return
    fleets = load("list fleets", lambda: orgdeck.fleets.list(limit=MAX_PAGE_SIZE)).items
    tools = load("list tools", lambda: orgdeck.tools.list(limit=MAX_PAGE_SIZE)).items
    environment_col, scope_col, what_col = st.columns([2, 2, 4], vertical_alignment="bottom")
    environment_id = environment_col.selectbox(
        "Environment", list(names), format_func=names.get, key="deploy_environment"
    )
    scope = scope_col.segmented_control(
        "Deploy", [AGENTS, FLEET], default=AGENTS, required=True, key="deploy_scope"
    )
    fleet_id = None
    if scope == AGENTS:
        chosen = what_col.multiselect(
            "Agents",
            list(versioned),
            format_func=lambda key: f"{versioned[key].name} · v{versioned[key].latest_version}",
            placeholder="Choose agents",
            key="deploy_agents",
        )
    else:
        fleet_names = {fleet.id: f"{fleet.name} ({fleet.agent_count} agents)" for fleet in fleets}
        fleet_id = what_col.selectbox(
            "Fleet", list(fleet_names), format_func=fleet_names.get, key="deploy_fleet"
        )
        chosen = []
    typed = overrides([tool.tool_key for tool in tools])
    if st.button("Preview changes", icon=":material/difference:", key="deploy_preview_button"):
        ask_preview(environment_id, chosen, fleet_id, typed)
    stored = st.session_state.get(PREVIEW)
    if stored:
        show_preview(stored, names.get(stored["request"]["environment_id"], "?"))


def ask_preview(
    environment_id: str | None, chosen: list[str], fleet_id: str | None, typed: dict[str, Any]
) -> None:
    """Preview what the form describes and keep it, so that Deploy deploys exactly what was shown."""
    try:
        if fleet_id is not None:
            chosen = [agent.stable_key for agent in orgdeck.fleets.get(fleet_id).agents]
            if not chosen:
                raise InvalidField("This fleet has no agents yet: add some on the Agents page.")
        if not environment_id or not chosen:
            raise InvalidField("Choose an environment and at least one agent or a fleet.")
        request = typed | {
            "environment_id": environment_id,
            "agent_stable_keys": chosen,
            "agent_versions": parse_versions(typed["agent_versions"]),
            "agent_provider_config": parse_config(typed["agent_provider_config"]),
        }
        preview = orgdeck.deployments.preview(**request)
    except InvalidField as error:
        st.error(str(error), icon=":material/error:")
    except ApiError as error:
        show_error(error, "preview the deployment")
    else:
        st.session_state[PREVIEW] = {"request": request, "preview": preview}


# --- Jobs ----------------------------------------------------------------------------------------


def older(cursor: str) -> None:
    st.session_state[JOB_CURSORS] = [*st.session_state.get(JOB_CURSORS, []), cursor]


def newer() -> None:
    st.session_state[JOB_CURSORS] = st.session_state.get(JOB_CURSORS, [])[:-1]


def jobs_tab(environment_names: dict[str, str]) -> None:
    status_col, environment_col = st.columns([3, 2])
    statuses = status_col.multiselect("Status", list(JOB_STATUSES), placeholder="Any", key="jobs_status")
    environment = environment_col.selectbox(
        "Environment",
        [ALL, *environment_names],
        format_func=lambda e: environment_names.get(e, e),
        key="jobs_environment",
    )
    # New filters start again from the newest page.
    cursors: list[str] = paging_position(JOB_CURSORS, (tuple(statuses), environment), [])
    page = load(
        "list deployment jobs",
        lambda: orgdeck.deployments.jobs(
            status=statuses or None,
            environment_id=None if environment == ALL else environment,
            limit=JOBS_PER_PAGE,
            cursor=cursors[-1] if cursors else None,
        ),
    )
    if not page.items:
        filtered = statuses or environment != ALL
        st.info(
            "No job matches these filters."
            if filtered
            else "No deployment jobs yet: start one from the **Deploy** tab."
        )
        return
    frame = pd.DataFrame(
        [
            {
                "Job": job.id,
                "Environment": environment_names.get(job.environment_id, job.environment_id),
                "Status": job.status,
                "Agents": len(job.agents),
                "Failed": sum(agent.status == "error" for agent in job.agents),
                "Created": job.created_at,
                "Duration": duration(job_duration(job), none=""),
                "Message": job.message or "",
            }
            for job in page.items
        ]
    )
    st.dataframe(
        coloured(frame, "Status"),
        hide_index=True,
        width="stretch",
        column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    pager = st.container(horizontal=True, vertical_alignment="center")
    pager.button(
        "Newer", icon=":material/chevron_left:", on_click=newer, disabled=not cursors, key="jobs_newer"
    )
    pager.button(
        "Older",
        icon=":material/chevron_right:",
        on_click=older,
        args=(page.next_cursor,),
        disabled=page.next_cursor is None,
        key="jobs_older",
    )
    job_detail(page.items, environment_names)


def job_detail(jobs: list[DeploymentJob], environment_names: dict[str, str]) -> None:
    st.divider()
    by_id = {job.id: job for job in jobs}
    wanted = st.session_state.get(JOB_CHOICE)
    if wanted and wanted not in by_id:
        # A job opened from elsewhere (the Deploy tab) may not be on this page of the list.
        try:
            by_id = {wanted: orgdeck.deployments.job(wanted)} | by_id
        except ApiError:
            st.session_state.pop(JOB_CHOICE)
    if st.session_state.get(JOB_CHOICE) not in by_id:
        st.session_state[JOB_CHOICE] = jobs[0].id

    def label(job_id: str) -> str:
        job = by_id[job_id]
        when = job.created_at.strftime("%Y-%m-%d %H:%M")
        return f"{when} · {environment_names.get(job.environment_id, '?')} · {job.status} · {job_id}"

    chosen = st.selectbox("Job", list(by_id), format_func=label, key=JOB_CHOICE)
    job = load("load the job", lambda: orgdeck.deployments.job(chosen))
    job_card(job, environment_names.get(job.environment_id, job.environment_id))
    started = job.started_at.strftime("%Y-%m-%d %H:%M:%S") if job.started_at else "—"
    finished = job.finished_at.strftime("%Y-%m-%d %H:%M:%S") if job.finished_at else "—"
    st.caption(f"Started {started} UTC · finished {finished} UTC")


# --- History -------------------------------------------------------------------------------------


def history_tab(environment_names: dict[str, str]) -> None:
    agents = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
    agent_col, environment_col, result_col, dates_col = st.columns([2, 2, 2, 2])
    agent = agent_col.selectbox("Agent", [ALL, *(a.stable_key for a in agents)], key="history_agent")
    environment = environment_col.selectbox(
        "Environment",
        [ALL, *environment_names],
        format_func=lambda e: environment_names.get(e, e),
        key="history_environment",
    )
    results = result_col.multiselect(
        "Result", ["complete", "error", "pending"], placeholder="Any", key="history_result"
    )
    with dates_col:
        start, end = recent_days("Dates", DEFAULT_ANALYTICS_DAYS, key="history_dates") or (None, None)
    filters = (agent, environment, results, start, end)
    offset = paging_position(HISTORY_OFFSET, filters, 0)
    page = load(
        "load the deployment history",
        lambda: orgdeck.deployments.history(
            agent=None if agent == ALL else agent,
            environment_id=None if environment == ALL else environment,
            status=results or None,
            start=start,
            end=end,
            limit=HISTORY_PER_PAGE,
            offset=offset,
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
                "Version": entry.version,
                "Result": entry.status,
                "Job status": entry.job_status,
                "Error": entry.error or "",
                "Job": entry.job_id,
            }
            for entry in page.items
        ]
    )
    st.dataframe(
        coloured(frame, "Result"),
        hide_index=True,
        width="stretch",
        height=460,
        column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    total = page.total or 0
    pager = st.container(horizontal=True, vertical_alignment="center")
    pager.button(
        "Newer",
        icon=":material/chevron_left:",
        on_click=move_history,
        args=(-HISTORY_PER_PAGE,),
        disabled=offset == 0,
        key="history_newer",
    )
    pager.button(
        "Older",
        icon=":material/chevron_right:",
        on_click=move_history,
        args=(HISTORY_PER_PAGE,),
        disabled=offset + len(page.items) >= total,
        key="history_older",
    )
    pager.caption(f"{offset + 1} to {offset + len(page.items)} of {total} agent deployments")


def move_history(step: int) -> None:
    st.session_state[HISTORY_OFFSET] = max(0, st.session_state.get(HISTORY_OFFSET, 0) + step)


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

overview, deploy, jobs, history = st.tabs([OVERVIEW, DEPLOY, JOBS, HISTORY], key=TAB, on_change="rerun")
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
