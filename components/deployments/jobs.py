"""The Jobs tab: deployment jobs filtered by status, environment and day, newest first, and the
card of the job picked (its state, progress, waves and per-agent results), which the Deploy tab also
shows for the job it follows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

import pandas as pd
import streamlit as st

from api.deployments import FINISHED_JOB_STATUSES, JOB_STATUSES, DeploymentJob
from components import layout
from components.changes.provenance import made_by_request
from components.connection import client
from components.deployments.rollout import rollout_panel
from components.deployments.tables import coloured, version
from components.deployments.tabs import ALL, BOUND, JOBS_DAYS, JOBS_ENVIRONMENT, JOBS_STATUS, JOBS_TABLE
from components.feedback import load, plain
from components.formatting import ago, duration
from components.paging import Pager
from components.tables import chosen_row

JOBS_PER_PAGE = 50
# How often a job that moves is read again while it is shown (the Jobs tab's, and the Deploy tab's).
POLL_SECONDS = 1.0
BADGE_COLOURS = {
    "complete": "green",
    "partial": "orange",
    "error": "red",
    "running": "blue",
    "pending": "gray",
    "paused": "violet",
    "aborted": "gray",
    "rolled_back": "red",
}
# How a finished job's summary is shown: failures as errors, a stop part-way as a warning.
SUMMARY_STYLES = {
    "complete": st.success,
    "partial": st.warning,
    "error": st.error,
    "aborted": st.warning,
    "rolled_back": st.error,
}


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


def job_card(
    job: DeploymentJob, environment_name: str, after_action: Callable[[DeploymentJob], None] | None = None
) -> None:
    """A job's state, progress, waves (with their controls; `after_action` is told of the job a
    control changed) and per-agent results."""
    done = sum(agent.status != "pending" for agent in job.agents)
    failed = sum(agent.status == "error" for agent in job.agents)
    head_col, badge_col = st.columns([5, 1], vertical_alignment="center")
    head_col.markdown(f"**Job `{job.id}`** to **{plain(environment_name)}** · {len(job.agents)} agent(s)")
    badge_col.badge(job.status, color=BADGE_COLOURS[job.status])
    if job.status in FINISHED_JOB_STATUSES:
        summary = job.message or f"{done - failed} of {len(job.agents)} agents deployed"
        SUMMARY_STYLES[job.status](plain(summary))
    else:
        waiting = {"pending": "Waiting for a worker", "paused": "Paused"}.get(job.status, "Deploying")
        st.progress(done / max(len(job.agents), 1), text=f"{waiting}… {done} of {len(job.agents)} done")
    started = job.started_at.strftime("%Y-%m-%d %H:%M:%S") if job.started_at else "not yet"
    st.caption(
        f"Created {ago(job.created_at)} · started {started} UTC · ran "
        f"{duration(job_duration(job), none='not yet')} · attempts {job.attempts}"
    )
    if job.change_request is not None:
        made_by_request(job.change_request)
    if job.rollout is not None:
        rollout_panel(job, after_action)
    results_table(job)


def job_filters(environment_names: dict[str, str]) -> tuple[list[str], str, tuple[date | None, date | None]]:
    """The statuses, environment and days picked; (None, None) for any day."""
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
    return statuses, environment, (picked[0], picked[-1]) if picked else (None, None)


def jobs_frame(jobs: list[DeploymentJob], environment_names: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
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
            for job in jobs
        ]
    )


def jobs_tab(environment_names: dict[str, str]) -> None:
    statuses, environment, days = job_filters(environment_names)
    # New filters start again from the newest page.
    pager = Pager("jobs_pager", (tuple(statuses), environment, days))
    page = load(
        "list deployment jobs",
        lambda: client().deployments.jobs(
            status=statuses or None,
            environment_id=None if environment == ALL else environment,
            start=days[0],
            end=days[1],
            limit=JOBS_PER_PAGE,
            cursor=pager.start,
        ),
    )
    if not page.items:
        filtered = statuses or environment != ALL or days[0] is not None
        st.info(
            "No job matches these filters."
            if filtered
            else "No deployment jobs yet: start one from the **Deploy** tab."
        )
        return
    chosen = chosen_row(
        coloured(jobs_frame(page.items, environment_names), "Status"),
        [job.id for job in page.items],
        key=JOBS_TABLE,
        column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
    pager.controls(page.next_cursor, f"Page {pager.number}, newest first")
    st.divider()
    listed = next(job for job in page.items if job.id == chosen)
    polling = POLL_SECONDS if moving(listed) else None
    st.fragment(chosen_job, run_every=polling)(listed, environment_names)


def moving(job: DeploymentJob) -> bool:
    """Whether the job changes by itself: not ended, and not paused (that waits for a person)."""
    return job.status not in FINISHED_JOB_STATUSES and job.status != "paused"


def chosen_job(listed: DeploymentJob, environment_names: dict[str, str]) -> None:
    """The job picked in the table, read again every POLL_SECONDS while it moves (its waves, the
    next wave's countdown, its results); once it stops, the whole tab is drawn again, its row too."""
    job = load("load the job", lambda: client().deployments.job(listed.id))
    if moving(listed) and not moving(job):
        st.rerun()
    job_card(job, environment_names.get(job.environment_id, job.environment_id))
