"""The History tab: each agent's part in each job (what version went where, and how it ended),
filtered by agent, environment, result and dates; the selected row opens its job in the Jobs tab or
is deployed again in one click (a rollback; requested for review where the environment is protected)."""

from __future__ import annotations

from datetime import UTC, date
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.common import MAX_PAGE_SIZE
from api.deployments import DEFAULT_ANALYTICS_DAYS, DeploymentRequest, HistoryEntry
from api.environments import Environment
from api.resource import body
from components import layout
from components.connection import client, current
from components.dates import recent_days
from components.deployments.tables import coloured, version
from components.deployments.tabs import ALL, BOUND, open_jobs
from components.feedback import load, notify, plain, show_error
from components.paging import Pager, next_offset, offset_caption
from components.permissions import control
from components.tables import chosen_row

HISTORY_PER_PAGE = 100


def history_filters(
    environment_names: dict[str, str],
) -> tuple[str, str, list[str], date | None, date | None]:
    """The agent, environment, results and first and last day picked (None for any)."""
    agents = load("list agents", lambda: client().agents.list(limit=MAX_PAGE_SIZE)).items
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
    return agent, environment, results, start, end


def history_table(entries: list[HistoryEntry]) -> HistoryEntry:
    """The entries; the row selected is the one whose job and rollback are offered below."""
    frame = pd.DataFrame(
        [
            {
                "When": entry.created_at,
                "Agent": entry.stable_key,
                "Environment": entry.environment_name,
                "Version": version(entry.version),
                "Result": entry.status,
                "Error": entry.error or "",
            }
            for entry in entries
        ]
    )
    by_row = {f"{entry.job_id}/{entry.stable_key}": entry for entry in entries}
    st.caption("Select a row to open its job or roll back to it.")
    chosen = chosen_row(
        coloured(frame, "Result"),
        list(by_row),
        key="history_table",
        column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    return by_row[chosen or next(iter(by_row))]


def open_job(entry: HistoryEntry) -> None:
    """Its environment and day: the Jobs tab lists it however long ago it ran (a callback)."""
    day = entry.created_at.astimezone(UTC).date()
    open_jobs(job_id=entry.job_id, environment_id=entry.environment_id, days=(day, day))


def rollback_request(entry: HistoryEntry) -> dict[str, Any]:
    """The deployment that puts this agent's version back where it ran (the version's own settings)."""
    return {
        "environment_id": entry.environment_id,
        "agent_stable_keys": [entry.stable_key],
        "agent_versions": {entry.stable_key: entry.version},
    }


def entry_actions(entry: HistoryEntry, environment: Environment | None) -> None:
    """The selected entry's job, and one click to deploy its version again (a change request where
    the environment is protected)."""
    what = f"{entry.stable_key} in {entry.environment_name} to v{entry.version}"
    actions = st.container(horizontal=True, vertical_alignment="bottom")
    actions.button("Open its job", icon=":material/open_in_new:", on_click=open_job, args=(entry,))
    if environment is None:
        return
    if entry.status != "complete":
        actions.button(
            f"Roll back {what}",
            icon=":material/undo:",
            disabled=True,
            help=f"This deployment ended {entry.status}: roll back to one that completed.",
        )
        return
    if environment.protected:
        reason = actions.text_input(
            "Reason", key=f"rollback_reason_{entry.job_id}", placeholder="Why roll back", width=320
        )
        if actions.button(
            f"Request rollback of {what}",
            icon=":material/approval:",
            **control(
                "openChangeRequest",
                at_least="operator",
                disabled=not reason.strip(),
                help=None if reason.strip() else "Type a reason first: the reviewers read it.",
            ),
        ):
            request_rollback(entry, what, reason.strip())
    elif actions.button(f"Roll back {what}", type="primary", icon=":material/undo:", **control("deploy")):
        roll_back(entry, what)


def roll_back(entry: HistoryEntry, what: str) -> None:
    try:
        job = client().deployments.deploy(**rollback_request(entry))
    except ApiError as error:
        show_error(error, "roll back", "deployment")
    else:
        notify(f"Rolling back **{plain(what)}**: job `{job.id}` (see the Jobs tab).")


def request_rollback(entry: HistoryEntry, what: str, reason: str) -> None:
    payload = body(DeploymentRequest, org_slug=current().org_slug, **rollback_request(entry))
    try:
        opened = client().change_requests.open("deployment", payload, reason)
    except ApiError as error:
        show_error(error, "request the rollback", "deployment")
    else:
        notify(
            f"Requested rolling back **{plain(what)}** ({opened.id}): it runs once "
            f"{opened.required_approvals} other member(s) approve it on the Changes page."
        )


def history_tab(environments: list[Environment]) -> None:
    environment_names = {environment.id: environment.name for environment in environments}
    agent, environment, results, start, end = history_filters(environment_names)
    pager = Pager("history_pager", (agent, environment, results, start, end))
    page = load(
        "load the deployment history",
        lambda: client().deployments.history(
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
    chosen = history_table(page.items)
    entry_actions(chosen, next((e for e in environments if e.id == chosen.environment_id), None))
    total = page.total or 0
    pager.controls(
        next_offset(pager.offset, len(page.items), total),
        offset_caption(pager.offset, len(page.items), total, "agent deployments"),
    )
