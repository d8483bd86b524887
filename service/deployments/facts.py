"""What the evaluation of a batch of (agent, environment) pairs reads, loaded in a few queries:
the agents, what runs where, the versions around it, the tools' deployed hashes, pinned prompts'
versions, the orgs' thresholds and the environments' names (service/deployments/states.py judges)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.agents.models import AgentRow, AgentVersionRow
from service.deployments.models import AgentDeploymentRow, DeploymentPolicyRow, DeploymentStateRow
from service.environments.models import EnvironmentRow
from service.orgs.models import OrganizationRow
from service.registries.models import RegistryArtifactRow, RegistryArtifactVersionRow, RegistryRow
from service.tools.models import ToolDeploymentRow

# A prompt reference `<orgSlug>/<registry>/<artifact>[@label-or-version]`; others are not followed.
PROMPT_REFERENCE = re.compile(r"^(?P<org>[^/\s]+)/(?P<registry>[^/\s]+)/(?P<artifact>[^/@\s]+)(?:@\S*)?$")

PromptKey = tuple[str, str, str]


@dataclass(frozen=True)
class AgentVersionFact:
    created_at: datetime
    content_hash: str
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class PromptVersionFact:
    number: int
    version: str
    created_at: datetime


@dataclass(frozen=True)
class PromptFact:
    org_id: str
    public: bool
    versions: list[PromptVersionFact]  # by number


@dataclass
class Facts:
    """Everything the evaluation of a batch of pairs reads, loaded in a few queries."""

    agents: dict[str, AgentRow] = field(default_factory=dict)
    deployed: dict[tuple[str, str], AgentDeploymentRow] = field(default_factory=dict)
    # By (agent_id, number): each pair's running version, the one after it, and the agent's newest.
    versions: dict[tuple[str, int], AgentVersionFact] = field(default_factory=dict)
    tool_hashes: dict[tuple[str, str], str] = field(default_factory=dict)
    prompts: dict[PromptKey, PromptFact] = field(default_factory=dict)
    stale_after_days: dict[str, int] = field(default_factory=dict)
    environment_names: dict[str, str] = field(default_factory=dict)
    # By (agent_id, environment_id): the hash of the policies that apply now (absent: none apply).
    policy_bundle_hashes: dict[tuple[str, str], str] = field(default_factory=dict)


def _prompt_key(reference: str | None) -> PromptKey | None:
    match = PROMPT_REFERENCE.match(reference or "")
    return (match["org"], match["registry"], match["artifact"]) if match else None


def readable_prompt(
    prompts: dict[PromptKey, PromptFact], reference: str | None, *, org_id: str
) -> PromptFact | None:
    """The referenced artifact, if the org may read it (its own registry, or a public one)."""
    key = _prompt_key(reference)
    prompt = prompts.get(key) if key else None
    if prompt is None or not (prompt.public or prompt.org_id == org_id):
        return None
    return prompt


def load_facts(session: Session, rows: list[DeploymentStateRow]) -> Facts:
    agent_ids = {row.agent_id for row in rows}
    environment_ids = {row.environment_id for row in rows}
    facts = Facts()
    facts.agents = {
        agent.id: agent for agent in session.scalars(select(AgentRow).where(AgentRow.id.in_(agent_ids)))
    }
    wanted = {(row.agent_id, row.environment_id) for row in rows}
    candidates = session.scalars(
        select(AgentDeploymentRow).where(
            AgentDeploymentRow.agent_id.in_(agent_ids), AgentDeploymentRow.environment_id.in_(environment_ids)
        )
    )
    facts.deployed = {
        (d.agent_id, d.environment_id): d for d in candidates if (d.agent_id, d.environment_id) in wanted
    }
    facts.versions = _versions(session, facts.deployed.values(), facts.agents.values())
    tool_keys = {key for d in facts.deployed.values() for key in d.config.get("toolRefs") or []}
    facts.tool_hashes = deployed_tool_hashes(session, environment_ids=environment_ids, tool_keys=tool_keys)
    facts.prompts = load_prompts(session, _pinned_references(facts.deployed.values()))
    org_ids = {row.org_id for row in rows}
    facts.stale_after_days = dict(
        session.execute(
            select(DeploymentPolicyRow.org_id, DeploymentPolicyRow.stale_after_days).where(
                DeploymentPolicyRow.org_id.in_(org_ids)
            )
        ).all()
    )
    facts.environment_names = dict(
        session.execute(
            select(EnvironmentRow.id, EnvironmentRow.name).where(EnvironmentRow.id.in_(environment_ids))
        ).all()
    )
    return facts


def _versions(
    session: Session, deployed: Iterable[AgentDeploymentRow], agents: Iterable[AgentRow]
) -> dict[tuple[str, int], AgentVersionFact]:
    """Each pair's running version, the one after it (the wait for it began then), each agent's newest.

    The newest is read here rather than through `Agent.newest`, which a session that has just made
    a version may still hold from before.
    """
    wanted = {(d.agent_id, n) for d in deployed for n in (d.version, d.version + 1)}
    wanted |= {(agent.id, agent.latest_version) for agent in agents if agent.latest_version}
    if not wanted:
        return {}
    query = select(
        AgentVersionRow.agent_id,
        AgentVersionRow.number,
        AgentVersionRow.created_at,
        AgentVersionRow.content_hash,
        AgentVersionRow.snapshot,
    ).where(
        AgentVersionRow.agent_id.in_({agent_id for agent_id, _ in wanted}),
        AgentVersionRow.number.in_({number for _, number in wanted}),
    )
    return {
        (agent_id, number): AgentVersionFact(created_at, digest, snapshot)
        for agent_id, number, created_at, digest, snapshot in session.execute(query)
        if (agent_id, number) in wanted
    }


def deployed_tool_hashes(
    session: Session, *, environment_ids: set[str], tool_keys: set[str]
) -> dict[tuple[str, str], str]:
    if not tool_keys:
        return {}
    query = select(
        ToolDeploymentRow.environment_id, ToolDeploymentRow.tool_key, ToolDeploymentRow.hash
    ).where(ToolDeploymentRow.environment_id.in_(environment_ids), ToolDeploymentRow.tool_key.in_(tool_keys))
    return {(env_id, key): digest for env_id, key, digest in session.execute(query)}


def _pinned_references(deployed: Iterable[AgentDeploymentRow]) -> set[str | None]:
    """The prompt reference of every pin of the running configs."""
    pinned: set[str | None] = set()
    for d in deployed:
        references = d.config.get("promptReferences") or {}
        pinned |= {references.get(name) for name in d.config.get("promptPins") or {}}
    return pinned


def load_prompts(session: Session, references: Iterable[str | None]) -> dict[PromptKey, PromptFact]:
    """The versions of every prompt artifact the references name (live registries only), by key."""
    keys = {key for key in map(_prompt_key, references) if key is not None}
    if not keys:
        return {}
    artifacts = session.execute(
        select(
            RegistryArtifactRow.id,
            OrganizationRow.slug,
            RegistryRow.name,
            RegistryArtifactRow.name,
            RegistryRow.org_id,
            RegistryRow.visibility,
        )
        .join(RegistryRow, RegistryRow.id == RegistryArtifactRow.registry_id)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(
            RegistryRow.deleted_at.is_(None),
            OrganizationRow.slug.in_({key[0] for key in keys}),
            RegistryRow.name.in_({key[1] for key in keys}),
            RegistryArtifactRow.name.in_({key[2] for key in keys}),
        )
    ).all()
    found = {row[0]: row for row in artifacts if (row[1], row[2], row[3]) in keys}
    versions: dict[str, list[PromptVersionFact]] = {artifact_id: [] for artifact_id in found}
    if found:
        query = (
            select(
                RegistryArtifactVersionRow.artifact_id,
                RegistryArtifactVersionRow.number,
                RegistryArtifactVersionRow.version,
                RegistryArtifactVersionRow.created_at,
            )
            .where(RegistryArtifactVersionRow.artifact_id.in_(found))
            .order_by(RegistryArtifactVersionRow.number)
        )
        for artifact_id, number, version, created_at in session.execute(query):
            versions[artifact_id].append(PromptVersionFact(number, version, created_at))
    return {
        (slug, registry, name): PromptFact(
            org_id=owner, public=visibility == "public", versions=versions[artifact_id]
        )
        for artifact_id, slug, registry, name, owner, visibility in found.values()
    }
