"""The Promotion tab: the promotion paths as columns (each root, then what promotes from it), the
agents as rows, each cell what runs there and since when, and what waits to go on with what holds
it back. Per environment that promotes from another: preview the promotion, take out any agent that
should keep waiting, then promote (or, to a protected one, request it for review)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from api import ApiError
from api.deployments import (
    DeploymentPreview,
    DeploymentRequest,
    PromotionAgent,
    PromotionEnvironment,
    PromotionView,
    RolloutStrategy,
    RunningVersion,
    WaitingPromotion,
)
from api.resource import body
from components.changes.waiting import REQUEST_QUERY
from components.connection import client, current
from components.deployments.preview import preview_table, preview_warnings, requested_reason
from components.deployments.rollout import strategy_form
from components.feedback import attempt, notify, plain, show_error
from components.formatting import ago
from components.governance.violations import agent_violations, is_refusal, show_refusal
from components.paging import Pager, next_offset, offset_caption
from components.permissions import control
from components.protection import approvals

# The promotion previewed: from, to, the agents waiting and their versions, and the preview.
PROMOTION_PREVIEW = "promotion_preview"
PROMOTION_PAGER = "promotion_pager"
CHOSEN_AGENTS = "promotion_agents"
AGENTS_PER_PAGE = 50
CHANGES_PAGE = "pages/changes.py"
ENVIRONMENTS_PAGE = "pages/environments.py"


def badges(environment: PromotionEnvironment) -> list[str]:
    """What a promotion to it meets, as the badges its column shows."""
    shown = []
    if environment.protected:
        shown.append(
            f":orange-badge[:material/lock: protected · {approvals(environment.required_approvals)}]"
        )
    if environment.production:
        shown.append(":violet-badge[counts as production]")
    if environment.require_promotion:
        shown.append(":blue-badge[promotion required]")
    if environment.require_promotion and environment.soak_minutes:
        shown.append(f":gray-badge[soak {environment.soak_minutes} min]")
    return shown


def since(running: RunningVersion) -> str:
    """`v7 · since 3 h`: what runs there and how long it has."""
    age = ago(running.since).removesuffix(" ago")
    pins = ", ".join(f"{name}@{version}" for name, version in sorted(running.prompt_pins.items()))
    return f"v{running.version} · since {age}" + (f"<br><small>{plain(pins)}</small>" if pins else "")


def held_by(waiting: WaitingPromotion, names: dict[str, str]) -> str:
    """What holds a waiting version back, in words: `soak 42 min left`, `review pending`, …"""
    source = plain(names.get(waiting.from_environment_id, "?"))
    if waiting.change_request_id is not None:
        return "review pending"  # linked below the table: a link in it would open a new session
    if waiting.soak_minutes_left is not None:
        return f"soak {waiting.soak_minutes_left} min left"
    if waiting.failed_since is not None:
        return f"failed job in {source} {ago(waiting.failed_since)}"
    if waiting.blocks:
        return plain("; ".join(waiting.blocks))
    return "ready to promote"


def cell(agent: PromotionAgent, environment: PromotionEnvironment, names: dict[str, str]) -> str:
    running = next((r for r in agent.running if r.environment_id == environment.id), None)
    lines = [since(running) if running else "—"]
    for waiting in agent.waiting:
        if waiting.environment_id == environment.id:
            lines.append(f"**v{waiting.version} waiting** · {held_by(waiting, names)}")
    return "<br>".join(lines)


def grid(view: PromotionView) -> str:
    """The paths as a Markdown table: a column per environment in path order, a row per agent."""
    names = {environment.id: environment.name for environment in view.environments}
    headers = [
        f"**{plain(e.name)}**" + "".join(f"<br>{badge}" for badge in badges(e)) for e in view.environments
    ]
    lines = ["| Agent | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
    for agent in view.items:
        cells = [cell(agent, environment, names) for environment in view.environments]
        lines.append(f"| **{plain(agent.stable_key)}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def empty_state() -> None:
    st.info(
        "**No promotion paths yet.** A path runs from one environment to the next: production "
        "*promotes from* staging, so that what ran in staging, and only that, goes on to production. "
        "An admin sets it on the later environment, under **Rollouts and promotion** in its settings "
        "on the Environments page: *Promotes from*, with *Require promotion* and *Soak minutes* to "
        "hold versions until they ran there long enough.",
        icon=":material/route:",
    )
    st.page_link(ENVIRONMENTS_PAGE, label="Set a promotion path", icon=":material/dns:")


def promotion_tab() -> None:
    pager = Pager(PROMOTION_PAGER, ())
    view = attempt(
        "load the promotion paths",
        lambda: client().deployments.promotions(limit=AGENTS_PER_PAGE, offset=pager.offset),
    )
    if view is None:
        return
    if not view.environments:
        empty_state()
        return
    st.markdown(grid(view), unsafe_allow_html=True)
    if view.total_agents > AGENTS_PER_PAGE:
        pager.controls(
            next_offset(pager.offset, len(view.items), view.total_agents),
            offset_caption(pager.offset, len(view.items), view.total_agents, "agents running on the paths")
            + ". A promotion takes what waits on this page.",
            labels=("Previous", "Next"),
        )
    elif not view.items:
        st.caption("No agent runs on these paths yet: deploy one to the first environment of a path.")
    names = {environment.id: environment.name for environment in view.environments}
    targets = [environment for environment in view.environments if environment.promotes_from]
    pending_links(targets)
    actions = st.container(horizontal=True, gap="small")
    for target in targets:
        promote_button(actions, view, target, names)
    stored = st.session_state.get(PROMOTION_PREVIEW)
    if stored:
        target = next((e for e in targets if e.id == stored["to"]), None)
        if target is None:  # the path changed since the preview
            st.session_state.pop(PROMOTION_PREVIEW)
        else:
            show_promotion(stored, target, names)


def pending_links(targets: list[PromotionEnvironment]) -> None:
    """A way to each change request under review that deploys to an environment of the paths."""
    links = st.container(horizontal=True, gap="small")
    for target in targets:
        for request_id in target.pending_change_request_ids:
            links.page_link(
                CHANGES_PAGE,
                label=f"Review pending to {target.name} ({request_id})",
                icon=":material/pending_actions:",
                query_params={REQUEST_QUERY: request_id},
                width="content",
            )


def waiting_for(view: PromotionView, target: PromotionEnvironment) -> dict[str, int]:
    """The versions waiting to go on to `target`, by stable key."""
    return {
        agent.stable_key: waiting.version
        for agent in view.items
        for waiting in agent.waiting
        if waiting.environment_id == target.id
    }


def promote_button(
    where: Any, view: PromotionView, target: PromotionEnvironment, names: dict[str, str]
) -> None:
    """`Promote to production` (or `Request promotion to production`): previews the promotion first."""
    source = target.promotes_from or ""
    versions = waiting_for(view, target)
    verb = "Request promotion" if target.protected else "Promote"
    nothing = f"Nothing waits: {target.name} runs what runs in {names.get(source, '?')}."
    operation = "openChangeRequest" if target.protected else "promote"
    if where.button(
        f"{verb} to {target.name}",
        icon=":material/approval:" if target.protected else ":material/upgrade:",
        key=f"promote_{target.id}",
        **control(operation, at_least="operator", disabled=not versions, help=None if versions else nothing),
    ):
        preview = preview_of(source, target, versions)
        if preview is not None:
            st.session_state.pop(CHOSEN_AGENTS, None)  # a new preview offers every agent again
            st.session_state[PROMOTION_PREVIEW] = {
                "from": source,
                "to": target.id,
                "waiting": versions,
                "versions": versions,
                "preview": preview,
            }


def preview_of(
    source: str, target: PromotionEnvironment, versions: dict[str, int]
) -> DeploymentPreview | None:
    return attempt(
        "preview the promotion",
        lambda: client().deployments.preview_promotion(source, target.id, sorted(versions)),
    )


def choose_agents(stored: dict[str, Any], target: PromotionEnvironment) -> bool:
    """Which of the agents waiting go on (every one unless some are taken out), previewed again
    when the choice changes. False when none is chosen: there is nothing to promote."""
    waiting: dict[str, int] = stored["waiting"]
    if len(waiting) < 2:
        return True
    chosen = st.multiselect(
        "Agents to promote",
        sorted(waiting),
        default=sorted(stored["versions"]),
        format_func=lambda key: f"{key} v{waiting[key]}",
        key=CHOSEN_AGENTS,
        help="Take out an agent to leave it waiting; the preview follows the choice.",
    )
    if not chosen:
        st.caption("Choose at least one agent to promote.")
        return False
    if set(chosen) != set(stored["versions"]):
        versions = {key: waiting[key] for key in chosen}
        preview = preview_of(stored["from"], target, versions)
        if preview is None:
            return False
        stored.update(versions=versions, preview=preview)
    return True


def show_promotion(stored: dict[str, Any], target: PromotionEnvironment, names: dict[str, str]) -> None:
    source = names.get(stored["from"], "?")
    with st.container(border=True):
        heading = st.empty()  # above the choice, counting what it chose
        route = f"from **{plain(source)}** to **{plain(target.name)}**"
        if not choose_agents(stored, target):
            heading.markdown(f"#### Promote {route}")
            discard_button()
            return
        preview: DeploymentPreview = stored["preview"]
        heading.markdown(f"#### Promote {len(preview.agents)} agent(s) {route}")
        preview_table(preview)
        blocked = preview_warnings(preview, target.name)
        denied = agent_violations(preview.violations)
        strategy = strategy_form("promotion", len(preview.agents)) if len(preview.agents) > 1 else None
        if target.protected:
            request_promotion(stored, target, strategy)
        else:
            promote(stored, target, strategy, blocked=blocked, denied=denied)
        discard_button()


def discard_button() -> None:
    if st.button("Discard preview", key="promotion_discard"):
        st.session_state.pop(PROMOTION_PREVIEW, None)
        st.rerun()


def promote(
    stored: dict[str, Any],
    target: PromotionEnvironment,
    strategy: RolloutStrategy | None,
    *,
    blocked: bool,
    denied: bool,
) -> None:
    why = (
        "A deny policy refuses this promotion: see the violations above."
        if denied
        else "Resolve the warnings above first: the promotion would be refused."
        if blocked
        else None
    )
    if st.button(
        f"Promote now to {target.name}",
        type="primary",
        icon=":material/rocket_launch:",
        key="promotion_go",
        **control("promote", disabled=blocked or denied, help=why),
    ):
        try:
            job = client().deployments.promote(
                stored["from"], target.id, sorted(stored["versions"]), strategy=strategy
            )
        except ApiError as error:
            if is_refusal(error):
                show_refusal(error, "promote")
            else:
                show_error(error, "promote")
        else:
            st.session_state.pop(PROMOTION_PREVIEW, None)
            notify(
                f"Promotion to **{plain(target.name)}** started (job {job.id}): the view shows it "
                "there once the job completes."
            )


def request_promotion(
    stored: dict[str, Any], target: PromotionEnvironment, strategy: RolloutStrategy | None
) -> None:
    """A protected target: the previewed promotion opened as a change request, pinned to the
    versions previewed, that runs once other members approve it."""
    st.info(
        f"**{plain(target.name)} is protected:** the promotion runs once "
        f"{approvals(target.required_approvals)} from other members approve it on the Changes page.",
        icon=":material/lock:",
    )
    label = f"Request promotion now to {target.name}"
    reason = requested_reason(label, key="promotion", placeholder="What this promotion brings")
    if reason is not None:
        payload = body(
            DeploymentRequest,
            org_slug=current().org_slug,
            environment_id=target.id,
            agent_stable_keys=sorted(stored["versions"]),
            agent_versions=stored["versions"],
            promoted_from=stored["from"],
            strategy=strategy,
        )
        try:
            opened = client().change_requests.open("deployment", payload, reason)
        except ApiError as error:
            show_error(error, "request the promotion", "deployment")
        else:
            st.session_state.pop(PROMOTION_PREVIEW, None)
            notify(
                f"Requested the promotion to **{plain(target.name)}** ({opened.id}): it runs once "
                f"{opened.required_approvals} other member(s) approve it on the Changes page."
            )
