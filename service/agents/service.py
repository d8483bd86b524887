"""Agents: the draft catalogue (create, find, configure, archive) and immutable numbered versions."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.agents import CreateAgent, UpdateAgent, content_hash
from api.common import patched_fields
from service.agents.models import AgentRow, AgentTagRow, AgentVersionRow, FleetRow
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.hooks import Hook
from service.redaction.objects import restored
from service.storage.db import insert_unless_taken, utcnow

# The draft fields a PATCH may change, by attribute name; fleet and tags are handled apart.
DRAFT_FIELDS = ("name", "provider", "provider_config", "prompt_references")

# What runs of an agent drifts or goes stale with its draft and its versions.
draft_changed: Hook[None] = Hook(
    "an agent's draft changed or a version was made", attached_by="service.deployments.states"
)
agent_archived: Hook[None] = Hook("an agent was archived", attached_by="service.deployments.states")


def create_agent(session: Session, *, org_id: str, request: CreateAgent) -> AgentRow:
    """A new agent with the given draft and no versions. Its stableKey must be new to the org, ever."""
    stable_key = request.stable_key
    if request.fleet_id is not None:
        _check_fleet(session, org_id=org_id, fleet_id=request.fleet_id)
    existing = session.scalar(
        select(AgentRow).where(AgentRow.org_id == org_id, AgentRow.stable_key == stable_key)
    )
    if existing is not None:
        raise _duplicate(existing)
    agent = AgentRow(
        org_id=org_id,
        stable_key=stable_key,
        name=request.name or stable_key,
        provider=request.provider,
        provider_config=restored(request.provider_config, {}, field="providerConfig"),
        prompt_references=request.prompt_references,
        fleet_id=request.fleet_id,
        tag_rows=[AgentTagRow(tag=tag) for tag in request.tags],
    )
    if not insert_unless_taken(session, agent):
        raise AlreadyExists(f"An agent with stableKey '{stable_key}' already exists", field="stableKey")
    return agent


def list_agents(
    session: Session,
    *,
    org_id: str,
    tags: Sequence[str],
    fleet_id: str | None,
    provider: str | None,
    search: str | None,
    limit: int,
    offset: int,
) -> tuple[list[AgentRow], int]:
    """Active agents matching every filter, by stableKey, and how many match in all."""
    conditions = [AgentRow.org_id == org_id, AgentRow.archived_at.is_(None)]
    if fleet_id is not None:
        conditions.append(AgentRow.fleet_id == fleet_id)
    if provider is not None:
        conditions.append(AgentRow.provider == provider)
    if search:
        term = search.lower()
        conditions.append(
            func.lower(AgentRow.stable_key).contains(term, autoescape=True)
            | func.lower(AgentRow.name).contains(term, autoescape=True)
        )
    for tag in tags:
        conditions.append(AgentRow.tag_rows.any(AgentTagRow.tag == tag))
    total = session.scalar(select(func.count(AgentRow.id)).where(*conditions)) or 0
    page = select(AgentRow).where(*conditions).order_by(AgentRow.stable_key).limit(limit).offset(offset)
    return list(session.scalars(page)), total


def get_agent(session: Session, *, org_id: str, stable_key: str, for_update: bool = False) -> AgentRow:
    """An active agent of the org; archived and unknown keys are both 404."""
    query = select(AgentRow).where(
        AgentRow.org_id == org_id, AgentRow.stable_key == stable_key, AgentRow.archived_at.is_(None)
    )
    agent = session.scalar(query.with_for_update() if for_update else query)
    if agent is None:
        raise NotFound(f"No agent '{stable_key}' in this organization", field="stableKey")
    return agent


def update_agent(session: Session, *, org_id: str, stable_key: str, request: UpdateAgent) -> AgentRow:
    """Apply the fields the request sets to the draft; `fleetId: null` leaves the fleet. A credential
    sent back as its placeholder keeps its stored value."""
    agent = get_agent(session, org_id=org_id, stable_key=stable_key, for_update=True)
    changes = patched_fields(request)
    if "provider_config" in changes:
        changes["provider_config"] = restored(
            changes["provider_config"], agent.provider_config, field="providerConfig"
        )
    if changes.get("fleet_id") is not None:
        _check_fleet(session, org_id=org_id, fleet_id=changes["fleet_id"])
    if "fleet_id" in changes:
        agent.fleet_id = changes["fleet_id"]
    if "tags" in changes:
        _set_tags(agent, changes["tags"])
    for field in DRAFT_FIELDS:
        if field in changes:
            setattr(agent, field, changes[field])
    # Tag rows live in another table, yet a change of them updates the agent; a draft set to what it
    # was updates nothing.
    if session.is_modified(agent):
        agent.updated_at = utcnow()
    session.flush()
    draft_changed(session, agent_id=agent.id)
    return agent


def archive_agent(session: Session, *, org_id: str, stable_key: str) -> AgentRow:
    """Hide the agent and its versions from every read; the rows and the stableKey stay."""
    agent = get_agent(session, org_id=org_id, stable_key=stable_key, for_update=True)
    agent.archived_at = utcnow()
    session.flush()
    agent_archived(session, agent_id=agent.id)
    return agent


def snapshot_agent(session: Session, *, org_id: str, stable_key: str) -> AgentVersionRow:
    """Freeze the draft as the next version, or return the newest version when the draft equals it.

    The agent's row is locked (SELECT … FOR UPDATE on PostgreSQL; SQLite write transactions hold
    the database lock from BEGIN), so concurrent snapshots number 1, 2, 3… without gaps; the
    unique (agent_id, number) constraint backs this up.
    """
    agent = get_agent(session, org_id=org_id, stable_key=stable_key, for_update=True)
    draft = agent.draft
    digest = content_hash(draft)
    if agent.newest is not None and agent.newest.content_hash == digest:
        return agent.newest
    version = AgentVersionRow(
        agent_id=agent.id,
        number=(agent.latest_version or 0) + 1,
        content_hash=digest,
        snapshot=draft.model_dump(mode="json", by_alias=True),
    )
    session.add(version)
    agent.latest_version = version.number
    session.flush()
    draft_changed(session, agent_id=agent.id)
    return version


def list_versions(
    session: Session, *, org_id: str, stable_key: str, limit: int, offset: int
) -> tuple[list[AgentVersionRow], int]:
    """The agent's versions, newest first, and how many it has."""
    agent = get_agent(session, org_id=org_id, stable_key=stable_key)
    query = (
        select(AgentVersionRow)
        .where(AgentVersionRow.agent_id == agent.id)
        .order_by(AgentVersionRow.number.desc())
        .limit(limit)
        .offset(offset)
    )
    return list(session.scalars(query)), agent.latest_version or 0


def get_version(session: Session, *, org_id: str, stable_key: str, number: int) -> AgentVersionRow:
    agent = get_agent(session, org_id=org_id, stable_key=stable_key)
    version = session.scalar(
        select(AgentVersionRow).where(AgentVersionRow.agent_id == agent.id, AgentVersionRow.number == number)
    )
    if version is None:
        raise NotFound(f"Agent '{stable_key}' has no version {number}", field="version")
    return version


def _set_tags(agent: AgentRow, tags: Sequence[str]) -> None:
    """Replace the tags, keeping the rows of tags that stay (a row's key is agent + tag)."""
    wanted = set(tags)
    agent.tag_rows = [row for row in agent.tag_rows if row.tag in wanted] + [
        AgentTagRow(tag=tag) for tag in sorted(wanted - set(agent.tags))
    ]


def _check_fleet(session: Session, *, org_id: str, fleet_id: str) -> None:
    if session.scalar(select(FleetRow.id).where(FleetRow.id == fleet_id, FleetRow.org_id == org_id)) is None:
        raise InvalidInput(f"fleetId '{fleet_id}' names no fleet of this organization", field="fleetId")


def _duplicate(existing: AgentRow) -> AlreadyExists:
    archived = " (archived; archived keys stay taken)" if existing.archived_at is not None else ""
    return AlreadyExists(
        f"An agent with stableKey '{existing.stable_key}' already exists{archived}", field="stableKey"
    )
