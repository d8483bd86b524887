"""The promotion view: the organization's promotion paths in order, what runs of each agent along
them and since when, and what waits to be promoted and what holds it back, in one read.

It reads a page of agents (those running somewhere on the paths) by the paths' environments in a
few bounded queries: the environments, the count and page of agents, their running versions, and
per environment that promotes from another its gates (service.deployments.promotion) and the open
change requests deploying to it (which the changes area, above this one, answers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Row, exists, func, select
from sqlalchemy.orm import Session

from api.deployments import (
    PromotionAgent,
    PromotionEnvironment,
    PromotionView,
    RunningVersion,
    WaitingPromotion,
)
from service.agents.models import AgentRow
from service.deployments.models import AgentDeploymentRow
from service.deployments.promotion import promotion_gates
from service.environments.models import EnvironmentRow
from service.events.hooks import Hook


class PendingDeployment(NamedTuple):
    """An open deployment change request: its id, the environment and the agents it deploys."""

    id: str
    environment_id: str
    stable_keys: tuple[str, ...]


pending_deployments: Hook[list[PendingDeployment]] = Hook(
    "the open deployment change requests to these environments", attached_by="service.changes.service"
)


def promotion_view(session: Session, *, org_id: str, limit: int, offset: int) -> PromotionView:
    environments = path_order(
        session.scalars(select(EnvironmentRow).where(EnvironmentRow.org_id == org_id)).all()
    )
    ids = [environment.id for environment in environments]
    pending = [
        request
        for answer in pending_deployments(session, org_id=org_id, environment_ids=ids)
        for request in answer
    ]
    on_paths = exists().where(
        AgentDeploymentRow.agent_id == AgentRow.id, AgentDeploymentRow.environment_id.in_(ids)
    )
    agents_on_paths = [AgentRow.org_id == org_id, AgentRow.archived_at.is_(None), on_paths]
    total = session.scalar(select(func.count(AgentRow.id)).where(*agents_on_paths)) or 0
    # The columns the rows show, not whole agents: those load their tags and newest version.
    agents = session.execute(
        select(AgentRow.id, AgentRow.stable_key, AgentRow.name)
        .where(*agents_on_paths)
        .order_by(AgentRow.stable_key)
        .limit(limit)
        .offset(offset)
    ).all()
    running = _running(session, agent_ids=[agent.id for agent in agents], environment_ids=ids)
    waiting = _waiting(session, environments, agents, running, pending)
    return PromotionView(
        environments=[_environment(environment, pending) for environment in environments],
        items=[
            PromotionAgent(
                stable_key=agent.stable_key,
                agent_name=agent.name,
                running=[running[agent.id, e] for e in ids if (agent.id, e) in running],
                waiting=waiting.get(agent.id, []),
            )
            for agent in agents
        ],
        limit=limit,
        offset=offset,
        total_agents=total,
    )


def path_order(environments: Iterable[EnvironmentRow]) -> list[EnvironmentRow]:
    """The environments on a promotion path, each root (by name) followed depth first by what
    promotes from it (by name), so that every path reads left to right. Others are left out."""
    children: dict[str | None, list[EnvironmentRow]] = {}
    promoted_from = set()
    for environment in sorted(environments, key=lambda e: e.name):
        children.setdefault(environment.promotes_from, []).append(environment)
        promoted_from.add(environment.promotes_from)
    ordered: list[EnvironmentRow] = []

    def follow(environment: EnvironmentRow) -> None:
        ordered.append(environment)
        for child in children.get(environment.id, []):
            follow(child)  # paths have no loops (service.environments refuses them)

    for root in children.get(None, []):
        if root.id in promoted_from:
            follow(root)
    return ordered


def _running(
    session: Session, *, agent_ids: list[str], environment_ids: list[str]
) -> dict[tuple[str, str], RunningVersion]:
    """What runs of these agents in these environments, by (agent id, environment id)."""
    if not agent_ids:
        return {}
    query = select(
        AgentDeploymentRow.agent_id,
        AgentDeploymentRow.environment_id,
        AgentDeploymentRow.version,
        AgentDeploymentRow.config["promptPins"],
        AgentDeploymentRow.deployed_at,
    ).where(
        AgentDeploymentRow.agent_id.in_(agent_ids), AgentDeploymentRow.environment_id.in_(environment_ids)
    )
    return {
        (agent_id, environment_id): RunningVersion(
            environment_id=environment_id, version=version, prompt_pins=pins or {}, since=since
        )
        for agent_id, environment_id, version, pins, since in session.execute(query)
    }


def _waiting(
    session: Session,
    environments: list[EnvironmentRow],
    agents: Sequence[Row[Any]],
    running: dict[tuple[str, str], RunningVersion],
    pending: list[PendingDeployment],
) -> dict[str, list[WaitingPromotion]]:
    """By agent id, the versions running in an environment that the one promoting from it does not
    run yet, each with what holds its promotion back."""
    waiting: dict[str, list[WaitingPromotion]] = {}
    for target in environments:
        if target.promotes_from is None:
            continue
        versions = {
            agent.id: (agent.stable_key, source)
            for agent in agents
            if (source := _version_in(running, agent.id, target.promotes_from)) is not None
            and _version_in(running, agent.id, target.id) != source
        }
        gates = promotion_gates(session, environment=target, versions=versions)
        for agent_id, (stable_key, version) in versions.items():
            gate = gates.get(agent_id)
            waiting.setdefault(agent_id, []).append(
                WaitingPromotion(
                    environment_id=target.id,
                    from_environment_id=target.promotes_from,
                    version=version,
                    soak_minutes_left=gate.soak_minutes_left if gate else None,
                    failed_since=gate.failed_at if gate else None,
                    blocks=[gate.message] if gate else [],
                    change_request_id=next(
                        (
                            request.id
                            for request in pending
                            if request.environment_id == target.id and stable_key in request.stable_keys
                        ),
                        None,
                    ),
                )
            )
    return waiting


def _version_in(
    running: dict[tuple[str, str], RunningVersion], agent_id: str, environment_id: str
) -> int | None:
    deployed = running.get((agent_id, environment_id))
    return deployed.version if deployed is not None else None


def _environment(environment: EnvironmentRow, pending: list[PendingDeployment]) -> PromotionEnvironment:
    return PromotionEnvironment(
        id=environment.id,
        name=environment.name,
        promotes_from=environment.promotes_from,
        protected=environment.protected,
        required_approvals=environment.required_approvals,
        require_promotion=environment.require_promotion,
        soak_minutes=environment.soak_minutes,
        production=environment.production,
        pending_change_request_ids=[
            request.id for request in pending if request.environment_id == environment.id
        ],
    )
