"""The Deploy tab: choose an environment and agents (or a fleet) with optional overrides and, for
more than one agent, waves; preview what would change, deploy exactly that, and follow the job live
to its end (or until its rollout is paused)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from api import ApiError
from api.agents import Agent
from api.common import MAX_PAGE_SIZE
from api.deployments import FINISHED_JOB_STATUSES, DeploymentJob
from api.environments import Environment
from components import layout
from components.connection import client
from components.deployments.jobs import POLL_SECONDS, job_card
from components.deployments.preview import FOLLOWING, PREVIEW, WATCHED, show_preview
from components.deployments.rollout import strategy_form
from components.deployments.tabs import open_jobs
from components.feedback import load, show_error
from components.forms import FormFields, InvalidField, json_object
from components.protection import PROTECTED_ICON, badge

AGENTS, FLEET = "Agents", "A fleet"


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
    return json_object(text, "agentProviderConfig", example='{"temperature": 0.1}')


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


def follow(job_id: str, environment_names: dict[str, str]) -> None:
    """The deployment started from this tab, redrawn every POLL_SECONDS until it ends."""
    try:
        job = client().deployments.job(job_id)
    except ApiError as error:
        st.session_state.pop(FOLLOWING, None)
        show_error(error, "follow the deployment")
        return
    job_card(job, environment_names.get(job.environment_id, job.environment_id), after_action=refollow)
    # A paused rollout waits for a person: polling stops until Resume (or Abort) moves it on.
    stopped = job.status in FINISHED_JOB_STATUSES or job.status == "paused"
    if stopped and st.session_state.get(FOLLOWING) == job_id:
        # A full run redraws the fragment without its timer: polling stops with the job.
        st.session_state.pop(FOLLOWING)
        st.rerun()


def refollow(job: DeploymentJob) -> None:
    """After Pause, Resume or Abort on the followed job: poll again while it still moves."""
    if job.status not in FINISHED_JOB_STATUSES and job.status != "paused":
        st.session_state[FOLLOWING] = job.id


def watched_job(environment_names: dict[str, str]) -> None:
    """The job the last Deploy started, if any, above the form for the next one."""
    watched = st.session_state.get(WATCHED)
    if not watched:
        return
    polling = POLL_SECONDS if st.session_state.get(FOLLOWING) == watched else None
    with st.container(border=True):
        st.fragment(follow, run_every=polling)(watched, environment_names)
        # Outside the fragment: switching tabs needs a run of the whole page.
        st.button(
            "Open in Jobs", icon=":material/open_in_new:", on_click=open_jobs, kwargs={"job_id": watched}
        )
    st.markdown("**New deployment**")


def deploy_tab(environments: list[Environment]) -> None:
    names = {environment.id: environment.name for environment in environments}
    webhooks = {environment.id for environment in environments if environment.target == "webhook"}
    protected = {environment.id for environment in environments if environment.protected}
    watched_job(names)
    agents: list[Agent] = load("list agents", lambda: client().agents.list(limit=MAX_PAGE_SIZE)).items
    versioned = {agent.stable_key: agent for agent in agents if agent.latest_version is not None}
    if not versioned:
        st.info("No agent has a version yet: snapshot one on the **Agents** page, then deploy it here.")
        return
    fleets = load("list fleets", lambda: client().fleets.list(limit=MAX_PAGE_SIZE)).items
    tools = load("list tools", lambda: client().tools.list(limit=MAX_PAGE_SIZE)).items
    fields = FormFields("deployment")
    environment_col, scope_col = layout.fields("deploy_target", 2)
    badges = {environment.id: badge(environment) for environment in environments}
    environment_id = environment_col.selectbox(
        "Environment",
        list(names),
        format_func=lambda e: " · ".join(
            part for part in (names[e], "webhook" if e in webhooks else "", badges[e]) if part
        ),
        key="deploy_environment",
    )
    fields.slot("environmentId", where=environment_col)
    if badges.get(environment_id):
        environment_col.caption(
            f"{PROTECTED_ICON} {badges[environment_id]}: deploying here opens a change request that "
            "runs once other members approve it."
        )
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
    # Waves mean something only for more than one agent: a fleet, or several chosen.
    fleet_size = next((fleet.agent_count for fleet in fleets if fleet.id == fleet_id), 0)
    if fleet_id is not None or len(chosen) > 1:
        typed["strategy"] = strategy_form("deploy", fleet_size if fleet_id is not None else len(chosen))
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
            chosen = [agent.stable_key for agent in client().fleets.get(fleet_id).agents]
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
        # The preview shows what changes, not how: the strategy goes with the deployment only.
        preview = client().deployments.preview(**{k: v for k, v in request.items() if k != "strategy"})
    except (InvalidField, ApiError) as error:
        fields.show(error, "preview the deployment")
    else:
        st.session_state[PREVIEW] = {"request": request, "preview": preview}
