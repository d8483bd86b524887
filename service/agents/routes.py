from __future__ import annotations

import re
from typing import Annotated

from fastapi import Path
from starlette.convertors import StringConvertor, register_url_convertor

from api.agents import RESERVED_STABLE_KEYS, Agent, AgentVersion, CreateAgent, ListAgents, UpdateAgent
from api.common import DEFAULT_PAGE_SIZE, MAX_INT32, OrgScoped, Page
from service.agents import service
from service.agents.models import AgentRow, AgentVersionRow
from service.http.deps import Author, LimitQuery, OffsetQuery, OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.routing import api_router
from service.redaction.objects import redacted


class StableKeySegment(StringConvertor):
    """A path segment that is never one of the fixed words under /agents/ (list, deployments, …).

    So `/agents/{stableKey}` cannot shadow `/agents/deployment-jobs` and the like, whatever order
    the routers are registered in.
    """

    regex = "(?!(?:{})(?:/|$))[^/]+".format(
        "|".join(re.escape(word) for word in sorted(RESERVED_STABLE_KEYS))
    )


register_url_convertor("stable_key", StableKeySegment())

router = api_router("/agents", tags=["Agents"])
AGENT = "/{stableKey:stable_key}"
StableKeyPath = Annotated[str, Path(alias="stableKey", description="The agent's stableKey.")]


@router.post("", response_model=Agent)
def create_agent(body: CreateAgent, caller: Author, session: WriteSession) -> Agent:
    """Create an agent with a draft and no versions. The stableKey is the agent's id for good."""
    agent = service.create_agent(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return _agent(agent)


@router.post("/list", response_model=Page[Agent])
def list_agents(body: ListAgents, caller: Viewer, session: ReadSession) -> Page[Agent]:
    """Active agents matching every filter given, ordered by stableKey."""
    agents, total = service.list_agents(
        session,
        org_id=caller.org_id_for(body.org_slug),
        tags=body.tags,
        fleet_id=body.fleet_id,
        provider=body.provider,
        search=body.search,
        limit=body.limit,
        offset=body.offset,
    )
    items = [_agent(agent) for agent in agents]
    return Page[Agent](items=items, limit=body.limit, offset=body.offset, total=total)


@router.get(AGENT, response_model=Agent)
def get_agent(
    stable_key: StableKeyPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> Agent:
    agent = service.get_agent(session, org_id=caller.org_id_for(org_slug), stable_key=stable_key)
    return _agent(agent)


@router.patch(AGENT, response_model=Agent)
def update_agent(
    stable_key: StableKeyPath, body: UpdateAgent, caller: Author, session: WriteSession
) -> Agent:
    """Configure the draft: only the fields sent change; `fleetId: null` takes the agent out of its fleet."""
    agent = service.update_agent(
        session, org_id=caller.org_id_for(body.org_slug), stable_key=stable_key, request=body
    )
    return _agent(agent)


@router.delete(AGENT, response_model=Agent)
def archive_agent(
    stable_key: StableKeyPath, org_slug: OrgSlugQuery, caller: Author, session: WriteSession
) -> Agent:
    """Archive the agent and its versions: they vanish from reads, and the stableKey stays taken."""
    agent = service.archive_agent(session, org_id=caller.org_id_for(org_slug), stable_key=stable_key)
    return _agent(agent)


@router.post(AGENT + "/versions", response_model=AgentVersion)
def create_agent_version(
    stable_key: StableKeyPath, body: OrgScoped, caller: Author, session: WriteSession
) -> AgentVersion:
    """Snapshot the draft as the next immutable version; an unchanged draft returns the newest version."""
    version = service.snapshot_agent(session, org_id=caller.org_id_for(body.org_slug), stable_key=stable_key)
    return _version(version)


@router.get(AGENT + "/versions", response_model=Page[AgentVersion])
def list_agent_versions(
    stable_key: StableKeyPath,
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[AgentVersion]:
    """The agent's versions, newest first."""
    versions, total = service.list_versions(
        session, org_id=caller.org_id_for(org_slug), stable_key=stable_key, limit=limit, offset=offset
    )
    items = [_version(version) for version in versions]
    return Page[AgentVersion](items=items, limit=limit, offset=offset, total=total)


@router.get(AGENT + "/versions/{version}", response_model=AgentVersion)
def get_agent_version(
    stable_key: StableKeyPath,
    version: Annotated[int, Path(ge=1, le=MAX_INT32, description="The version number, from 1.")],
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
) -> AgentVersion:
    found = service.get_version(
        session, org_id=caller.org_id_for(org_slug), stable_key=stable_key, number=version
    )
    return _version(found)


def _agent(row: AgentRow) -> Agent:
    """The agent as readers see it: the credentials in its providerConfig redacted."""
    agent = Agent.model_validate(row)
    return agent.model_copy(update={"provider_config": redacted(agent.provider_config)})


def _version(row: AgentVersionRow) -> AgentVersion:
    """The version as readers see it: the credentials in its snapshot's providerConfig redacted."""
    version = AgentVersion.model_validate(row)
    snapshot = version.snapshot.model_copy(
        update={"provider_config": redacted(version.snapshot.provider_config)}
    )
    return version.model_copy(update={"snapshot": snapshot})
