"""Which of the Deployments page's tabs is open, kept in the URL, and the way from any of them (or
from a link to a job) to the Jobs tab, filtered to the jobs in question."""

from __future__ import annotations

from datetime import date

import streamlit as st

from api.deployments import FAILED_JOB_STATUSES
from components.tables import select

TAB = "tab"
OVERVIEW, PROMOTION, DEPLOY, JOBS, HISTORY = "Overview", "Promotion", "Deploy", "Jobs", "History"
# Filters are kept in the URL (`bind="query-params"`), so that a view can be linked to and shared.
BOUND = "query-params"
JOBS_STATUS, JOBS_ENVIRONMENT, JOBS_DAYS = "job_status", "job_env", "job_days"
JOBS_TABLE = "jobs_table"
ALL = "All"
FAILED = list(FAILED_JOB_STATUSES)


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
