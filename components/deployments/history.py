"""The History tab: each agent's part in each job (what version went where, and how it ended),
filtered by agent, environment, result and dates; a row opens its job in the Jobs tab."""

from __future__ import annotations

from datetime import UTC, date

import pandas as pd
import streamlit as st

from api.common import MAX_PAGE_SIZE
from api.deployments import DEFAULT_ANALYTICS_DAYS, HistoryEntry
from components import layout
from components.connection import client
from components.dates import recent_days
from components.deployments.tables import coloured, version
from components.deployments.tabs import ALL, BOUND, open_jobs
from components.feedback import load
from components.paging import Pager, next_offset, offset_caption
from components.tables import row_opener

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


def history_table(entries: list[HistoryEntry]) -> None:
    """The entries, each row opening its job."""
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
            for entry in entries
        ]
    )
    by_job = {entry.job_id: entry for entry in entries}

    def open_job(job_id: str) -> None:
        # Its environment and day: the Jobs tab lists it however long ago it ran.
        entry = by_job[job_id]
        day = entry.created_at.astimezone(UTC).date()
        open_jobs(job_id=job_id, environment_id=entry.environment_id, days=(day, day))

    st.caption("Click a row to open its job.")
    row_opener(
        coloured(frame, "Result"),
        [entry.job_id for entry in entries],
        key="history_table",
        on_open=open_job,
        column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )


def history_tab(environment_names: dict[str, str]) -> None:
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
    history_table(page.items)
    total = page.total or 0
    pager.controls(
        next_offset(pager.offset, len(page.items), total),
        offset_caption(pager.offset, len(page.items), total, "agent deployments"),
    )
