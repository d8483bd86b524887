"""Wire models of agents and their immutable versions, and the client's `agents` operations.

An agent is addressed by its `stableKey` within an organization. Its draft (name, provider,
providerConfig, promptReferences) is edited freely; a version is an immutable, numbered snapshot
of the draft. Tags and the fleet are catalogue metadata: they are not part of a version.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import AfterValidator, Field, StringConstraints

from api.common import (
    DEFAULT_PAGE_SIZE,
    JsonObject,
    Name,
    OrgScoped,
    Page,
    PageLimit,
    PageOffset,
    Patch,
    Record,
    Timestamp,
)
from api.resource import Resource, body

# Words under /agents/ that name other operations, so they can never be an agent's key.
RESERVED_STABLE_KEYS = frozenset(
    {"list", "deployments", "deployment-jobs", "tool-deployments", "tool-deployment-records"}
)
STABLE_KEY_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,99}$"
TAG_PATTERN = r"^[a-z0-9][a-z0-9_.:/-]{0,63}$"
PROVIDER_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
PROMPT_REFERENCE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"
PROMPT_REFERENCE_PATTERN = r"^\S(?:.*\S)?$"  # not blank, no surrounding whitespace, one line
MAX_TAGS = 32
MAX_PROMPT_REFERENCES = 50


def canonical_json(value: Any) -> str:
    """The one serialization used for sizes and content hashes: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(snapshot: AgentSnapshot) -> str:
    """sha256 (hex) of a snapshot's canonical JSON in wire form: equal drafts, equal hashes."""
    wire = snapshot.model_dump(mode="json", by_alias=True)
    return hashlib.sha256(canonical_json(wire).encode()).hexdigest()


def _not_reserved(key: str) -> str:
    if key in RESERVED_STABLE_KEYS:
        raise ValueError(f"'{key}' is reserved; choose another key")
    return key


def _unique_sorted(tags: list[str]) -> list[str]:
    return sorted(set(tags))


StableKey = Annotated[
    str,
    StringConstraints(pattern=STABLE_KEY_PATTERN, min_length=1, max_length=100),
    AfterValidator(_not_reserved),
]
Provider = Annotated[str, StringConstraints(pattern=PROVIDER_PATTERN, min_length=1, max_length=64)]
Tag = Annotated[str, StringConstraints(pattern=TAG_PATTERN, min_length=1, max_length=64)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(_unique_sorted)]
PromptReferenceName = Annotated[str, StringConstraints(pattern=PROMPT_REFERENCE_NAME_PATTERN)]
# Stored exactly as given, e.g. "demo/support-prompts/triage-system@production".
PromptReference = Annotated[str, StringConstraints(pattern=PROMPT_REFERENCE_PATTERN, max_length=500)]
PromptReferences = Annotated[
    dict[PromptReferenceName, PromptReference], Field(max_length=MAX_PROMPT_REFERENCES)
]
FleetId = Annotated[str, StringConstraints(min_length=1, max_length=40)]
SearchText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]


class CreateAgent(OrgScoped):
    stable_key: StableKey
    provider: Provider
    name: Name | None = Field(default=None, description="Defaults to the stableKey.")
    tags: Tags = []
    provider_config: JsonObject = {}
    prompt_references: PromptReferences = {}
    fleet_id: FleetId | None = None


class UpdateAgent(OrgScoped):
    """Changes to an agent's draft: only the fields sent change. `fleetId: null` leaves the fleet."""

    name: Patch[Name] = None
    tags: Patch[Tags] = None
    provider: Patch[Provider] = None
    provider_config: Patch[JsonObject] = None
    prompt_references: Patch[PromptReferences] = None
    fleet_id: FleetId | None = None


class ListAgents(OrgScoped):
    """Filters combine with AND; `tags` match when the agent has every one of them."""

    tags: list[Tag] = Field(default=[], max_length=MAX_TAGS)
    fleet_id: FleetId | None = None
    provider: Provider | None = None
    search: SearchText | None = Field(default=None, description="Case-insensitive, in stableKey or name.")
    limit: PageLimit = DEFAULT_PAGE_SIZE
    offset: PageOffset = 0


class AgentSnapshot(Record):
    """What a version freezes: the draft configuration."""

    name: str
    provider: str
    provider_config: dict[str, Any]
    prompt_references: dict[str, str]


class Agent(Record):
    id: str
    stable_key: str
    name: str
    provider: str
    tags: list[str]
    provider_config: dict[str, Any]
    prompt_references: dict[str, str]
    fleet_id: str | None = None
    latest_version: int | None = Field(default=None, description="Number of the newest version, if any.")
    draft_hash: str = Field(description="sha256 of the draft's canonical JSON, comparable to contentHash.")
    has_unversioned_changes: bool = Field(description="The draft differs from the newest version.")
    created_at: Timestamp
    updated_at: Timestamp
    archived_at: Timestamp | None = None


class AgentVersion(Record):
    id: str
    stable_key: str
    version: int
    content_hash: str = Field(description="sha256 (hex) of the snapshot's canonical JSON.")
    snapshot: AgentSnapshot
    created_at: Timestamp


def _agent_path(stable_key: str, *rest: str) -> str:
    return "/".join(["/agents", quote(stable_key, safe=""), *rest])


class AgentsResource(Resource):
    def create(
        self,
        stable_key: str,
        provider: str,
        *,
        name: str | None = None,
        tags: list[str] | None = None,
        provider_config: dict[str, Any] | None = None,
        prompt_references: dict[str, str] | None = None,
        fleet_id: str | None = None,
        org_slug: str | None = None,
    ) -> Agent:
        payload = body(
            CreateAgent,
            org_slug=self._org(org_slug),
            stable_key=stable_key,
            provider=provider,
            name=name,
            tags=tags,
            provider_config=provider_config,
            prompt_references=prompt_references,
            fleet_id=fleet_id,
        )
        return Agent.model_validate(self._client.request("POST", "/agents", json=payload))

    def list(
        self,
        *,
        tags: list[str] | None = None,
        fleet_id: str | None = None,
        provider: str | None = None,
        search: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[Agent]:
        payload = body(
            ListAgents,
            org_slug=self._org(org_slug),
            tags=tags,
            fleet_id=fleet_id,
            provider=provider,
            search=search,
            limit=limit,
            offset=offset,
        )
        return Page[Agent].model_validate(self._client.request("POST", "/agents/list", json=payload))

    def get(self, stable_key: str, *, org_slug: str | None = None) -> Agent:
        params = {"orgSlug": self._org(org_slug)}
        return Agent.model_validate(self._client.request("GET", _agent_path(stable_key), params=params))

    def update(
        self,
        stable_key: str,
        *,
        name: str | None = None,
        tags: list[str] | None = None,
        provider: str | None = None,
        provider_config: dict[str, Any] | None = None,
        prompt_references: dict[str, str] | None = None,
        fleet_id: str | None = None,
        leave_fleet: bool = False,
        org_slug: str | None = None,
    ) -> Agent:
        """Change the draft; fields left as None keep their value. `leave_fleet` takes it out of its fleet."""
        payload = body(
            UpdateAgent,
            org_slug=self._org(org_slug),
            name=name,
            tags=tags,
            provider=provider,
            provider_config=provider_config,
            prompt_references=prompt_references,
            fleet_id=fleet_id,
        )
        if leave_fleet:
            payload["fleetId"] = None
        return Agent.model_validate(self._client.request("PATCH", _agent_path(stable_key), json=payload))

    def archive(self, stable_key: str, *, org_slug: str | None = None) -> Agent:
        """Archive the agent and its versions; its stableKey stays taken."""
        params = {"orgSlug": self._org(org_slug)}
        return Agent.model_validate(self._client.request("DELETE", _agent_path(stable_key), params=params))

    def snapshot(self, stable_key: str, *, org_slug: str | None = None) -> AgentVersion:
        """Freeze the draft as a new version (or return the newest one when the draft equals it)."""
        payload = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("POST", _agent_path(stable_key, "versions"), json=payload)
        return AgentVersion.model_validate(answer)

    def versions(
        self,
        stable_key: str,
        *,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[AgentVersion]:
        """The agent's versions, newest first."""
        params = {"orgSlug": self._org(org_slug), "limit": limit, "offset": offset}
        answer = self._client.request("GET", _agent_path(stable_key, "versions"), params=params)
        return Page[AgentVersion].model_validate(answer)

    def version(self, stable_key: str, number: int, *, org_slug: str | None = None) -> AgentVersion:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", _agent_path(stable_key, "versions", str(number)), params=params)
        return AgentVersion.model_validate(answer)
