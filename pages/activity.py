"""Activity: the audit trail. Who changed what and when, through which request; filtered by actor,
action, target type and dates, paged by cursor; each change opens its target's page; and a chart of
the changes per day by action, counted by the service."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import pandas as pd
import streamlit as st

from api.audit import STATS_DEFAULT_DAYS, STATS_MAX_DAYS, AuditEvent
from components import layout
from components.changes.provenance import made_by_request
from components.charts import PLOT_CONFIG, changes_per_day_figure
from components.connection import client, current
from components.dates import recent_days
from components.feedback import attempt, load, plain
from components.paging import Pager
from components.tables import OPEN_PARAM, chosen_row

TABLE = "activity_table"
PAGE_SIZE = 50
ANY = "Any"
BOUND = "query-params"
# Where a change's target is shown, and whether that page opens it from `?open=<target id>`.
TARGET_PAGES: dict[str, tuple[str, bool]] = {
    "agent": ("pages/agents.py", True),
    "change_request": ("pages/changes.py", True),
    "agent_version": ("pages/agents.py", False),
    "environment": ("pages/environments.py", True),
    "secret": ("pages/environments.py", False),
    "signing_key": ("pages/environments.py", False),
    "registry": ("pages/registries.py", True),
    "artifact": ("pages/registries.py", False),
    "artifact_version": ("pages/registries.py", False),
    "api_key": ("pages/api_keys.py", True),
    "member": ("pages/members.py", True),
    "deployment_job": ("pages/deployments.py", True),
    "deployment_settings": ("pages/deployments.py", False),
    "tool": ("pages/tools.py", True),
    "tool_deployment": ("pages/tools.py", False),
    "fleet": ("pages/fleets.py", True),
    "policy": ("pages/governance.py", True),
    "provider": ("pages/providers.py", True),
    "channel": ("pages/notifications.py", False),
    "delivery": ("pages/notifications.py", False),
    "subscription": ("pages/notifications.py", False),
}

connection = current()
orgdeck = client()


def who(event: AuditEvent) -> str:
    actor = event.actor
    if actor.member_email:
        return actor.member_email
    return f"service key {actor.key_name or actor.key_id}"


def target_words(event: AuditEvent) -> str:
    """`deployment job job_…`: its type and name, one column wide enough at 1024 px."""
    kind = (event.target.type or "").replace("_", " ")
    return " ".join(part for part in (kind, event.target.name or event.target.id or "") if part)


def approved_by(event: AuditEvent) -> str:
    """Who approved the change request that made it (empty for a change nobody reviewed)."""
    if event.change_request is None:
        return ""
    return ", ".join(approver.email for approver in event.change_request.approved_by)


def filters() -> tuple[str | None, str | None, str | None, tuple[datetime, datetime] | None]:
    actor_col, action_col, type_col, dates_col = layout.fields("activity_filters", 4)
    members = attempt("list the members", lambda: orgdeck.members.list(include_inactive=True))
    people = {m.email: f"{m.name} ({m.email})" for m in members.items} if members else {}
    actor = actor_col.selectbox(
        "Actor", [ANY, *people], format_func=lambda a: people.get(a, a), key="activity_actor", bind=BOUND
    )
    action = action_col.text_input(
        "Action", placeholder="e.g. createAgent", key="activity_action", bind=BOUND, max_chars=100
    ).strip()
    target_type = type_col.selectbox(
        "Target type", [ANY, *sorted(TARGET_PAGES)], key="activity_target_type", bind=BOUND
    )
    with dates_col:
        days = recent_days(
            "Dates (UTC)", STATS_DEFAULT_DAYS, key="activity_dates", at_most=STATS_MAX_DAYS, bind=True
        )
    period = None
    if days:
        start = datetime.combine(days[0], time.min, tzinfo=UTC)
        period = (start, datetime.combine(days[1], time.min, tzinfo=UTC) + timedelta(days=1))
    return (
        None if actor == ANY else actor,
        action or None,
        None if target_type == ANY else target_type,
        period,
    )


def chart(
    actor: str | None, action: str | None, target_type: str | None, period: tuple[datetime, datetime] | None
) -> None:
    """The changes per day of what the filters pick, not of the whole organization."""
    start, end = period or (None, None)
    stats = attempt(
        "count the changes",
        lambda: orgdeck.audit.stats(
            start=start, end=end, actor=actor, action=action, target_type=target_type
        ),
    )
    if stats is None:
        return
    filtered = any((actor, action, target_type))
    if not stats.total:
        st.info(
            "No change matches these filters." if filtered else "No changes in these days.",
            icon=":material/info:",
        )
        return
    st.plotly_chart(changes_per_day_figure(stats), width="stretch", config=PLOT_CONFIG)
    busiest = ", ".join(
        f"{a.member_email or f'service key {a.key_name}'} ({a.count:,})" for a in stats.per_actor[:5]
    )
    st.caption(
        f"{stats.total:,} changes in these days{' matching the filters' if filtered else ''}. "
        f"Most active: {plain(busiest)}."
    )


def event_detail(event: AuditEvent) -> None:
    target = event.target
    st.subheader(f"{event.action} · {target_words(event) or 'no target'}")
    st.caption(
        f"By **{plain(who(event))}** with key `{event.actor.key_name or event.actor.key_id}` at "
        f"{event.occurred_at:%Y-%m-%d %H:%M:%S} UTC · request `{event.request_id or '—'}`"
    )
    page, opens = TARGET_PAGES.get(target.type or "", (None, False))
    if page:
        query = {OPEN_PARAM: target.id} if opens and target.id else None
        label = f"Open {target.type.replace('_', ' ')} {target.name or target.id or ''}".strip()
        st.page_link(page, label=label, icon=":material/arrow_forward:", query_params=query)
    if event.change_request is not None:
        made_by_request(event.change_request)
    if event.changes:
        st.code(json.dumps(event.changes, indent=2, ensure_ascii=False), language="json")
    else:
        st.caption("The request set no fields (a delete, a revoke or a sign-in).")


st.title("Activity")
st.caption(
    "Every change made in this organization, newest first: who made it (a person, or a service key), "
    "what they did, to what, and the request it came with. Nothing here can be edited or removed."
)
actor, action, target_type, period = filters()
chart(actor, action, target_type, period)

pager = Pager("activity_pages", (actor, action, target_type, period))
start, end = period or (None, None)
page = load(
    "list the activity",
    lambda: orgdeck.audit.list(
        actor=actor,
        action=action,
        target_type=target_type,
        start=start,
        end=end,
        limit=PAGE_SIZE,
        cursor=pager.start,
    ),
)
if not page.items:
    filtered = any((actor, action, target_type))
    st.info(
        "No change matches these filters." if filtered else "No changes in these days.",
        icon=":material/history:",
    )
    st.stop()
table = pd.DataFrame(
    [
        {
            "When": e.occurred_at,
            "Actor": who(e),
            "Action": e.action,
            "Target": target_words(e),
            "Approved by": approved_by(e),
        }
        for e in page.items
    ]
)
chosen_id = chosen_row(
    table,
    [e.id for e in page.items],
    key=TABLE,
    width="stretch",
    column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")},
)
pager.controls(page.next_cursor, f"Page {pager.number}, newest first")
st.divider()
event_detail(next(e for e in page.items if e.id == chosen_id))
