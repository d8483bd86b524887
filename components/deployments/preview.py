"""The Deploy tab's preview: what a deployment would change, agent by agent and field by field,
what would stop it, and the way on: deploy it, or request it where the environment is protected."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.deployments import DeploymentPreview, DeploymentRequest, RolloutStrategy
from api.resource import body
from components.connection import client, current
from components.deployments.rollout import split_words, strategy_words
from components.deployments.tables import coloured, shown
from components.feedback import notify, plain, show_error
from components.governance.violations import agent_violations, is_refusal, show_refusal
from components.permissions import control

# The preview shown, kept so that Deploy deploys exactly what was shown; the job a Deploy started,
# and (while it runs) that it is being followed.
PREVIEW = "deploy_preview"
WATCHED = "deploy_watched"
FOLLOWING = "deploy_following"


def preview_table(preview: DeploymentPreview) -> None:
    """A row per field that changes. What a reviewer reads (agent, field, before, after) comes first,
    so that it stays in view at 1024 px; what repeats on every row of an agent comes last."""
    rows = []
    for agent in preview.agents:
        before = f"v{agent.current_version}" if agent.current_version else "not deployed"
        repeated = {"Version": f"{before} → v{agent.target_version}", "Agent status": agent.status}
        if not agent.changes:
            rows.append(
                {"Agent": agent.stable_key, "Field": "", "Before": "", "After": "", "Change": "unchanged"}
                | repeated
            )
        for change in agent.changes:
            rows.append(
                {
                    "Agent": agent.stable_key,
                    "Field": change.field,
                    "Before": shown(change.before),
                    "After": shown(change.after),
                    "Change": change.kind,
                }
                | repeated
            )
    st.dataframe(coloured(pd.DataFrame(rows), "Change", whole_row=True), hide_index=True, width="stretch")


def strategy_caption(strategy: RolloutStrategy, agents: int) -> None:
    st.caption(f":material/waves: In waves: {strategy_words(strategy)} → {split_words(strategy, agents)}")


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


def requested_reason(label: str, *, key: str, placeholder: str) -> str | None:
    """A reason and the button that opens a change request with it: the reason once clicked. The
    button waits for a reason (the reviewers read it) and for an operator."""
    reason = st.text_input("Reason", key=f"{key}_reason", placeholder=placeholder).strip()
    clicked = st.button(
        label,
        type="primary",
        icon=":material/approval:",
        key=f"{key}_request",
        **control(
            "openChangeRequest",
            at_least="operator",
            disabled=not reason,
            help=None if reason else "Type a reason first: the reviewers read it.",
        ),
    )
    return reason if clicked else None


def request_deployment(request: dict[str, Any], environment_name: str) -> None:
    """A protected environment's Deploy: the previewed deployment opened as a change request."""
    label = f"Request deployment to {environment_name}"
    reason = requested_reason(label, key="deploy", placeholder="What this release brings")
    if reason is not None:
        payload = body(DeploymentRequest, org_slug=current().org_slug, **request)
        try:
            opened = client().change_requests.open("deployment", payload, reason)
        except ApiError as error:
            show_error(error, "request the deployment", "deployment")
        else:
            st.session_state.pop(PREVIEW, None)
            notify(
                f"Requested the deployment to **{plain(environment_name)}** ({opened.id}): it runs once "
                f"{opened.required_approvals} other member(s) approve it on the Changes page."
            )


def deploy_actions(
    request: dict[str, Any], environment_name: str, *, protected: bool, blocked: bool, denied: bool
) -> None:
    """Deploy what was previewed (not where the environment is protected), or discard the preview."""
    actions = st.container(horizontal=True)
    if not protected and actions.button(
        f"Deploy to {environment_name}",
        type="primary",
        icon=":material/rocket_launch:",
        key="deploy_go",
        **control(
            "deploy",
            disabled=blocked or denied,
            help=(
                "A deny policy refuses this deployment: see the violations above."
                if denied
                else "Resolve the warnings above first: the deployment would be refused."
                if blocked
                else None
            ),
        ),
    ):
        try:
            job = client().deployments.deploy(**request)
        except ApiError as error:
            if is_refusal(error):
                show_refusal(error, "start the deployment")
            else:
                show_error(error, "start the deployment", "deployment")
        else:
            st.session_state.pop(PREVIEW, None)
            st.session_state[WATCHED] = job.id
            st.session_state[FOLLOWING] = job.id
            st.rerun()
    if actions.button("Discard preview", key="deploy_discard"):
        st.session_state.pop(PREVIEW, None)
        st.rerun()


def show_preview(stored: dict[str, Any], environment_name: str, *, protected: bool) -> None:
    preview: DeploymentPreview = stored["preview"]
    request: dict[str, Any] = stored["request"]
    counts = Counter(agent.status for agent in preview.agents)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("added", "changed", "unchanged") if counts[s])
    st.markdown(f"#### Preview: {len(preview.agents)} agent(s) to **{plain(environment_name)}** ({summary})")
    preview_table(preview)
    if request.get("strategy") is not None:
        strategy_caption(request["strategy"], len(preview.agents))
    blocked = preview_warnings(preview, environment_name)
    denied = agent_violations(preview.violations)
    if not preview.has_changes:
        st.info("Nothing would change: every agent already runs exactly this there. Deploying redeploys it.")
    if protected:
        st.info(
            f"**{plain(environment_name)} is protected:** a deployment there runs once other members "
            "approve it.",
            icon=":material/lock:",
        )
        request_deployment(request, environment_name)
    deploy_actions(request, environment_name, protected=protected, blocked=blocked, denied=denied)
