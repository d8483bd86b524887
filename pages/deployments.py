"""Deployments: how delivery is going (metrics, heatmaps, every agent's state in every environment),
what waits to be promoted along the promotion paths and what holds it back, preview and deploy with a live follow of the job, and the jobs and history behind it all. Each
tab's body is a module of components/deployments."""

from __future__ import annotations

from datetime import UTC

import streamlit as st

from api.common import MAX_PAGE_SIZE
from api.environments import Environment
from components.connection import client
from components.deployments.deploy import deploy_tab
from components.deployments.history import history_tab
from components.deployments.jobs import jobs_tab
from components.deployments.overview import overview_tab
from components.deployments.promotion import promotion_tab
from components.deployments.tabs import BOUND, DEPLOY, HISTORY, JOBS, OVERVIEW, PROMOTION, TAB, open_jobs
from components.feedback import attempt, load, show_notice
from components.tables import linked_id

orgdeck = client()

st.title("Deployments")
st.caption(
    "How delivery is going, what runs where and what has drifted from it, what waits to be promoted; "
    "preview a deployment field by field, deploy it and follow the job to its end."
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
overview, promotion, deploy, jobs, history = st.tabs(
    [OVERVIEW, PROMOTION, DEPLOY, JOBS, HISTORY], key=TAB, on_change="rerun", bind=BOUND
)
# Only the open tab runs: each one's calls are made when a person looks at it.
with overview:
    if overview.open:
        overview_tab()
with promotion:
    if promotion.open:
        promotion_tab()
with deploy:
    if deploy.open:
        deploy_tab(environments)
with jobs:
    if jobs.open:
        jobs_tab(environment_names)
with history:
    if history.open:
        history_tab(environments)
