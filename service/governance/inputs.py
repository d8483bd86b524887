"""What a check reads of an agent beyond its own config: each prompt reference resolved to the
version it would deploy (and its content), each tool's deployment record in the environment. Read
for a whole evaluation at once, in a fixed number of queries however many agents it covers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from service.agents.models import AgentRow
from service.deployments.facts import PROMPT_REFERENCE
from service.environments.models import EnvironmentRow
from service.orgs.models import OrganizationRow
from service.redaction.objects import redacted
from service.registries.models import (
    RegistryArtifactLabelRow,
    RegistryArtifactRow,
    RegistryArtifactVersionRow,
    RegistryRow,
)
from service.registries.service import content_text
from service.tools.models import ToolDeploymentRow

ArtifactKey = tuple[str, str, str]  # (orgSlug, registry, artifact)
PromptWanted = tuple[str, str | None]  # (reference, pinned version)


@dataclass(frozen=True)
class Subject:
    """An agent as it would run (or runs) in an environment: what a check reads."""

    agent: AgentRow
    config: dict[str, Any]

    def prompts_wanted(self) -> list[tuple[str, PromptWanted]]:
        """Each prompt reference by name with the version the deployment pins (None: unpinned)."""
        pins = self.config.get("promptPins") or {}
        references = self.config.get("promptReferences") or {}
        return [(name, (reference, pins.get(name))) for name, reference in references.items()]


@dataclass(frozen=True)
class ResolvedPrompt:
    version: str
    number: int
    content: str


@dataclass
class Resolutions:
    """The prompts by (reference, pin) and the tools' records by (environment id, tool key)."""

    prompts: dict[PromptWanted, ResolvedPrompt] = field(default_factory=dict)
    tools: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def policy_input(
    subject: Subject, environment: EnvironmentRow, deployment: dict[str, Any], resolved: Resolutions
) -> dict[str, Any]:
    """The CEL input `{agent, environment, deployment}` (docs/reference.md, "Policy checks")."""
    config = subject.config
    return {
        "agent": {
            "stableKey": subject.agent.stable_key,
            "name": config.get("name", subject.agent.name),
            "provider": config.get("provider", subject.agent.provider),
            "model": config.get("model") or "",
            "providerConfig": redacted(config.get("providerConfig") or {}),
            "tags": subject.agent.tags,
            "tools": [
                {"ref": ref, "deployment": resolved.tools.get((environment.id, ref))}
                for ref in config.get("toolRefs") or []
            ],
            "prompts": [_prompt(name, wanted, resolved) for name, wanted in subject.prompts_wanted()],
        },
        "environment": {
            "name": environment.name,
            "protected": environment.protected,
            "target": environment.target,
        },
        "deployment": deployment,
    }


def _prompt(name: str, wanted: PromptWanted, resolved: Resolutions) -> dict[str, Any]:
    prompt = resolved.prompts.get(wanted)
    return {
        "name": name,
        "reference": wanted[0],
        "version": prompt.version if prompt else None,
        "number": prompt.number if prompt else None,
        "content": prompt.content if prompt else None,
    }


def resolve(
    session: Session, *, org_id: str, environment_ids: Iterable[str], subjects: Iterable[Subject]
) -> Resolutions:
    subjects = list(subjects)
    wanted = {pair for subject in subjects for _, pair in subject.prompts_wanted()}
    tool_keys = {key for subject in subjects for key in subject.config.get("toolRefs") or []}
    return Resolutions(
        prompts=_resolve_prompts(session, org_id=org_id, wanted=wanted),
        tools=_tool_records(
            session, org_id=org_id, environment_ids=set(environment_ids), tool_keys=tool_keys
        ),
    )


def _tool_records(
    session: Session, *, org_id: str, environment_ids: set[str], tool_keys: set[str]
) -> dict[tuple[str, str], dict[str, Any]]:
    if not tool_keys or not environment_ids:
        return {}
    query = select(ToolDeploymentRow).where(
        ToolDeploymentRow.org_id == org_id,
        ToolDeploymentRow.environment_id.in_(environment_ids),
        ToolDeploymentRow.tool_key.in_(tool_keys),
    )
    return {
        (record.environment_id, record.tool_key): {
            "name": record.tool_name,
            "provider": record.provider,
            "toolId": record.tool_id,
            "version": record.version,
            "hash": record.hash,
            "toolProviderConfig": redacted(record.tool_provider_config or {}),
            "deployedAt": record.deployed_at.isoformat(),
        }
        for record in session.scalars(query)
    }


def _artifact_key(reference: str) -> ArtifactKey | None:
    match = PROMPT_REFERENCE.match(reference)
    return (match["org"], match["registry"], match["artifact"]) if match else None


def _resolve_prompts(
    session: Session, *, org_id: str, wanted: set[PromptWanted]
) -> dict[PromptWanted, ResolvedPrompt]:
    """Each wanted reference resolved as a deployment resolves it: the pinned version; else the
    label (or failing that, the version) after `@`; else the newest version. Four queries in all."""
    keys = {key for reference, _ in wanted if (key := _artifact_key(reference)) is not None}
    if not keys:
        return {}
    artifacts = _readable_artifacts(session, org_id=org_id, keys=keys)
    if not artifacts:
        return {}
    ids = list(artifacts.values())
    labels = {
        (artifact_id, label): version_id
        for artifact_id, label, version_id in session.execute(
            select(
                RegistryArtifactLabelRow.artifact_id,
                RegistryArtifactLabelRow.label,
                RegistryArtifactLabelRow.version_id,
            ).where(RegistryArtifactLabelRow.artifact_id.in_(ids))
        )
    }
    by_version: dict[tuple[str, str], str] = {}
    newest: dict[str, tuple[int, str]] = {}
    for artifact_id, version_id, number, version in session.execute(
        select(
            RegistryArtifactVersionRow.artifact_id,
            RegistryArtifactVersionRow.id,
            RegistryArtifactVersionRow.number,
            RegistryArtifactVersionRow.version,
        ).where(RegistryArtifactVersionRow.artifact_id.in_(ids))
    ):
        by_version[(artifact_id, version)] = version_id
        newest[artifact_id] = max(newest.get(artifact_id, (0, "")), (number, version_id))
    chosen: dict[PromptWanted, str] = {}
    for reference, pin in wanted:
        key = _artifact_key(reference)
        artifact_id = artifacts.get(key) if key else None
        if artifact_id is None:
            continue
        selector = pin or reference.partition("@")[2]
        version_id = (
            labels.get((artifact_id, selector)) or by_version.get((artifact_id, selector))
            if selector
            else newest.get(artifact_id, (0, None))[1]
        )
        if version_id is not None:
            chosen[(reference, pin)] = version_id
    return _contents(session, chosen)


def _readable_artifacts(session: Session, *, org_id: str, keys: set[ArtifactKey]) -> dict[ArtifactKey, str]:
    """The artifacts the keys name that the organization may read (its own, or a public registry's)."""
    rows = session.execute(
        select(OrganizationRow.slug, RegistryRow.name, RegistryArtifactRow.name, RegistryArtifactRow.id)
        .join(RegistryRow, RegistryRow.id == RegistryArtifactRow.registry_id)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(
            RegistryRow.deleted_at.is_(None),
            or_(RegistryRow.org_id == org_id, RegistryRow.visibility == "public"),
            OrganizationRow.slug.in_({key[0] for key in keys}),
            RegistryRow.name.in_({key[1] for key in keys}),
            RegistryArtifactRow.name.in_({key[2] for key in keys}),
        )
    )
    return {
        (slug, registry, name): artifact_id
        for slug, registry, name, artifact_id in rows
        if (slug, registry, name) in keys
    }


def _contents(session: Session, chosen: dict[PromptWanted, str]) -> dict[PromptWanted, ResolvedPrompt]:
    if not chosen:
        return {}
    query = select(RegistryArtifactVersionRow).where(RegistryArtifactVersionRow.id.in_(set(chosen.values())))
    versions = {row.id: row for row in session.scalars(query)}
    return {
        wanted: ResolvedPrompt(
            version=versions[version_id].version,
            number=versions[version_id].number,
            content=content_text(versions[version_id]),
        )
        for wanted, version_id in chosen.items()
    }
