"""Overview: the organization at a glance, what needs attention, each count a way into the page
that shows what it counts."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from api.changes import ChangeRequest
from api.common import MAX_PAGE_SIZE
from api.deployments import FAILED_JOB_STATUSES, AgentStatus, DeploymentJob
from api.environments import Environment
from api.notifications import Channel, LogEntry
from components.changes.waiting import REQUEST_QUERY, awaiting_me
from components.changes.wording import KIND_LABELS, approvals_text, requester
from components.charts import STATE_LABELS
from components.connection import client, current
from components.feedback import attempt, load, plain
from components.formatting import ago

WINDOW_DAYS = 7
PAIR_STATES = ("drifted", "stale", "error")
SHOWN = 3
PAIRS_READ = 20  # agents with pairs needing attention read for the list; the counts cover them all
TILE_WIDTH = 222
DEPLOYMENTS, NOTIFICATIONS, CHANGES = "pages/deployments.py", "pages/notifications.py", "pages/changes.py"
GOVERNANCE = "pages/governance.py"

connection = current()
orgdeck = client()
today = datetime.now(UTC).date()
first_day = today - timedelta(days=WINDOW_DAYS - 1)
window = [first_day.isoformat(), today.isoformat()]


def tile(
    where: DeltaGenerator,
    label: str,
    value: int,
    link: str,
    *,
    page: str,
    query: dict[str, str | list[str]] | None = None,
    help: str = "",
) -> None:
    """A count and the way to what it counts."""
    with where.container(border=True, width=TILE_WIDTH):
        st.metric(label, f"{value:,}", help=help or None)
        st.page_link(page, label=link, icon=":material/arrow_forward:", query_params=query)


def failed_jobs_query(environment: str | None = None) -> dict[str, str | list[str]]:
    query: dict[str, str | list[str]] = {
        "tab": "Jobs",
        "job_status": list(FAILED_JOB_STATUSES),
        "job_days": window,
    }
    if environment:
        query["job_env"] = environment
    return query


def pair_lines(matrix_items: list[AgentStatus], names: dict[str, str]) -> list[str]:
    lines = []
    for item in matrix_items:
        where = names.get(item.environment_id, item.environment_id)
        why = (
            item.error
            or ", ".join(change.field for change in item.drift[:3])
            or ", ".join(f"{change.field} {change.before} → {change.after}" for change in item.newer)
        )
        lines.append(
            f"**{plain(item.stable_key)}** in {plain(where)}: {STATE_LABELS[item.state].lower()}"
            + (f" ({plain(why[:140])})" if why else "")
        )
    return lines


def job_line(job: DeploymentJob, names: dict[str, str]) -> str:
    failed = [agent.stable_key for agent in job.agents if agent.status == "error"]
    what = f"{len(failed)} of {len(job.agents)} agents failed" if failed else plain(job.message or job.status)
    return (
        f"Job to **{plain(names.get(job.environment_id, '?'))}** {job.status} {ago(job.created_at)}: {what}"
    )


def delivery_line(entry: LogEntry) -> str:
    reason = f": {plain(entry.error[:140])}" if entry.error else ""
    return f"`{entry.event_type}` to **{plain(entry.channel_name)}** dead {ago(entry.created_at)}{reason}"


Item = tuple[str, str, str, dict[str, str | list[str]] | None, str]  # icon, text, page, query, link
ERROR, WARNING = ":red[:material/error:]", ":orange[:material/warning:]"
REVIEW = ":blue[:material/approval:]"


def review_line(request: ChangeRequest) -> str:
    return (
        f"**{KIND_LABELS[request.kind]} · {plain(request.target)}** waits for your review: "
        f"asked by {plain(requester(request))} {ago(request.created_at)} ({plain(request.reason[:140])}), "
        f"{approvals_text(request)}"
    )


def attention(
    awaiting: list[ChangeRequest],
    environments: list[Environment],
    channels: list[Channel],
    pairs: list[AgentStatus],
    jobs: list[DeploymentJob],
    dead: list[LogEntry],
) -> None:
    names = {environment.id: environment.name for environment in environments}
    items: list[Item] = [
        (REVIEW, review_line(request), CHANGES, {REQUEST_QUERY: request.id}, "Review it")
        for request in awaiting
    ]
    for environment in environments:
        if environment.target == "webhook" and environment.signing_key_created_at is None:
            text = (
                f"**{plain(environment.name)}** is a webhook target without a signing key: deployments "
                "to it are refused."
            )
            items.append((ERROR, text, "pages/environments.py", None, "Create its key"))
    for channel in channels:
        if channel.state == "disabled":
            text = f"Channel **{plain(channel.name)}** is disabled: {plain(channel.disabled_reason or '')}"
            items.append((ERROR, text, NOTIFICATIONS, None, "See the channels"))
    errors = [item for item in pairs if item.state == "error"]
    for line in pair_lines(errors[:SHOWN], names):
        items.append((ERROR, line, DEPLOYMENTS, {"state": "error"}, "See the agents"))
    for job in jobs[:SHOWN]:
        query = failed_jobs_query(names.get(job.environment_id))
        items.append((ERROR, job_line(job, names), DEPLOYMENTS, query, "See the jobs"))
    for entry in dead[:SHOWN]:
        query = {"log_status": "dead", "log_dates": window}
        items.append((ERROR, delivery_line(entry), NOTIFICATIONS, query, "See the log"))
    others = [item for item in pairs if item.state != "error"]
    if others:
        text = (
            f"{len(others)} agent{'s' if len(others) != 1 else ''} in an environment drifted from what was "
            f"deployed or waiting on a newer version: {'; '.join(pair_lines(others[:2], names))}"
            + ("…" if len(others) > 2 else "")
        )
        items.append((WARNING, text, DEPLOYMENTS, {"state": ["drifted", "stale"]}, "See them"))
    st.subheader("What needs attention")
    if not items:
        st.success(
            f"Nothing: no change waits for your review, no failed deployments or dead deliveries in "
            f"the last {WINDOW_DAYS} days, and every agent runs what it should.",
            icon=":material/check_circle:",
        )
        return
    with st.container(border=True):
        for icon, text, page, query, link in items:
            with st.container(horizontal=True, vertical_alignment="center"):
                st.markdown(f"{icon} {text}", width="stretch")
                st.page_link(page, label=link, query_params=query, width="content")


st.title(connection.org_name)
if connection.embedded:
    st.info(
        "**This is demo data.** The console started its own service on this machine and filled the "
        "organization `demo` with made-up agents, deployments and deliveries, so that every page has "
        "something to show. Point `ORGDECK_API_URL` and `ORGDECK_API_KEY` at your Orgdeck service to "
        "manage your own.",
        icon=":material/science:",
    )
st.caption(f"Organization `{connection.org_slug}` on {connection.url}")

environments = load("list environments", lambda: orgdeck.environments.list(limit=MAX_PAGE_SIZE)).items
agents = load("count agents", lambda: orgdeck.agents.list(limit=1))
matrix = load(
    "count the agents' states", lambda: orgdeck.deployments.status(state=list(PAIR_STATES), limit=PAIRS_READ)
)
failures = load(
    "count failed jobs",
    lambda: orgdeck.deployments.heatmap(
        group_by="environment", metric="failures", start=first_day, end=today
    ),
)
failed_jobs = load(
    "list failed jobs",
    lambda: orgdeck.deployments.jobs(
        status=list(FAILED_JOB_STATUSES), start=first_day, end=today, limit=SHOWN
    ),
).items
deliveries = load("count deliveries", lambda: orgdeck.notifications.log_stats(days=WINDOW_DAYS))
dead = load(
    "list dead deliveries",
    lambda: orgdeck.notifications.logs(
        status=["dead"], start=datetime.combine(first_day, time.min, tzinfo=UTC), limit=SHOWN
    ),
).items
channels = load("list channels", orgdeck.notifications.list_channels).items
counts = matrix.counts
pairs = [item for item in matrix.items if item.state in PAIR_STATES]

# Two rows of tiles that wrap: four and three abreast in a wide window, two by two in a narrow one.
tiles = st.container(horizontal=True, gap="small")
tile(tiles, "Agents", agents.total or 0, "Agents", page="pages/agents.py")
tile(tiles, "Environments", len(environments), "Environments", page="pages/environments.py")
tile(
    tiles,
    f"Failed jobs, {WINDOW_DAYS} days",
    sum(map(sum, failures.failures)),
    "Failed jobs",
    page=DEPLOYMENTS,
    query=failed_jobs_query(),
    help=f"Deployment jobs that ended in error or partly failed, created in the last {WINDOW_DAYS} UTC days.",
)
tile(
    tiles,
    f"Dead deliveries, {WINDOW_DAYS} days",
    sum(day.dead for day in deliveries.per_day),
    "Dead deliveries",
    page=NOTIFICATIONS,
    query={"log_status": "dead", "log_dates": window},
    help="Notifications whose every retry failed: the event never reached its channel.",
)
states = st.container(horizontal=True, gap="small")
tile(
    states,
    "Drifted",
    counts.get("drifted", 0),
    "Drifted agents",
    page=DEPLOYMENTS,
    query={"state": "drifted"},
    help="Agents in an environment whose draft or tools changed since what runs there was deployed.",
)
tile(
    states,
    "Stale",
    counts.get("stale", 0),
    "Stale agents",
    page=DEPLOYMENTS,
    query={"state": "stale"},
    help="Agents in an environment where a newer version has waited too long to be deployed.",
)
tile(
    states,
    "Error",
    counts.get("error", 0),
    "Failing agents",
    page=DEPLOYMENTS,
    query={"state": "error"},
    help="Agents in an environment whose last deployment failed.",
)
compliance = attempt("count policy violations", orgdeck.policies.compliance)
if compliance is not None:
    enforced = [v for v in compliance.violations if v.enforcement in ("deny", "warn")]
    denied = sum(v.enforcement == "deny" for v in enforced)
    tile(
        states,
        "Policy violations",
        len(enforced),
        "Compliance",
        page=GOVERNANCE,
        help=f"Deny and warn policy violations among what runs now ({denied} deny, "
        f"{len(enforced) - denied} warn); audit-only ones are in the compliance view.",
    )

awaiting = load("list the changes waiting for your review", awaiting_me)
attention(awaiting, environments, channels, pairs, failed_jobs, dead)

health = load("check the service's health", orgdeck.health)
st.divider()
st.caption(
    f"Service {health.status} · database {health.database} · version {health.version}. Every endpoint "
    f"takes an organization key in `X-API-Key` (create one under **Settings → API keys**); the "
    f"interactive API reference is at {connection.url}/docs."
)
