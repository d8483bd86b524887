"""Wire models of tools and of tool deployment records, and their client."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, StringConstraints

from api.common import (
    Description,
    JsonObject,
    Name,
    OrgScoped,
    Page,
    Patch,
    Record,
    Request,
    Timestamp,
)
from api.environments import EnvironmentName
from api.resource import Resource, body

# Lowercase letters and digits, with inner dots, underscores and hyphens (e.g. `zendesk.search_tickets`).
TOOL_KEY_PATTERN = r"^[a-z0-9](?:[a-z0-9._-]{0,126}[a-z0-9])?$"
# Tool deployment records show this many previous deployments; `historyCount` says how many exist.
HISTORY_SHOWN = 20

ToolKey = Annotated[str, StringConstraints(pattern=TOOL_KEY_PATTERN)]
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input is a JSON object: its schema says `"type": "object"`, as providers require."""
    if schema.get("type") != "object":
        raise ValueError('must be a JSON Schema for an object: {"type": "object", "properties": {...}}')
    if not isinstance(schema.get("properties", {}), dict):
        raise ValueError("`properties` must be an object mapping argument names to their schemas")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ValueError("`required` must be a list of argument names")
    return schema


InputSchema = Annotated[JsonObject, AfterValidator(_object_schema)]
EMPTY_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class CreateTool(OrgScoped):
    name: Name
    tool_key: ToolKey = Field(description="Unique in the organization; cannot change later.")
    description: Description = ""
    input_schema: InputSchema = Field(default_factory=lambda: dict(EMPTY_INPUT_SCHEMA))


class UpdateTool(Request):
    """Only the fields sent change. The tool is addressed by its id; the key's organization is implied."""

    name: Patch[Name] = None
    description: Patch[Description] = None
    input_schema: Patch[InputSchema] = None


class Tool(Record):
    id: str
    name: str
    tool_key: str
    description: str
    input_schema: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp


class RecordToolDeployment(OrgScoped):
    """What is deployed of a tool in an environment; one record per toolKey and environment."""

    tool_name: Label
    tool_key: ToolKey
    environment: EnvironmentName = Field(description="The name of an environment of the organization.")
    provider: Label
    tool_id: Label = Field(description="The tool's identifier at the provider.")
    version: Label
    hash: Label
    tool_provider_config: JsonObject | None = None


class PreviousDeployment(Record):
    """A version of the tool that an environment ran before."""

    provider: str
    tool_id: str
    version: str
    hash: str
    deployed_at: Timestamp
    replaced_at: Timestamp


class ToolDeployment(Record):
    id: str
    tool_name: str
    tool_key: str
    environment: str
    environment_id: str
    provider: str
    tool_id: str
    version: str
    hash: str
    tool_provider_config: dict[str, Any] | None = None
    deployed_at: Timestamp = Field(description="When this version and hash were recorded.")
    created_at: Timestamp
    updated_at: Timestamp
    history_count: int = Field(description="How many earlier deployments this record replaced.")
    history: list[PreviousDeployment] = Field(description=f"The newest {HISTORY_SHOWN}, newest first.")


class ToolsResource(Resource):
    def create(
        self,
        name: str,
        tool_key: str,
        *,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        org_slug: str | None = None,
    ) -> Tool:
        payload = body(
            CreateTool,
            org_slug=self._org(org_slug),
            name=name,
            tool_key=tool_key,
            description=description,
            input_schema=input_schema,
        )
        return Tool.model_validate(self._client.request("POST", "/tools", json=payload))

    def list(
        self, *, limit: int | None = None, offset: int | None = None, org_slug: str | None = None
    ) -> Page[Tool]:
        params = {"orgSlug": self._org(org_slug), "limit": limit, "offset": offset}
        return Page[Tool].model_validate(self._client.request("GET", "/tools", params=params))

    def get(self, tool_id: str) -> Tool:
        return Tool.model_validate(self._client.request("GET", f"/tools/{tool_id}"))

    def update(
        self,
        tool_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
    ) -> Tool:
        payload = body(UpdateTool, name=name, description=description, input_schema=input_schema)
        return Tool.model_validate(self._client.request("PATCH", f"/tools/{tool_id}", json=payload))

    def delete(self, tool_id: str) -> Tool:
        """Delete a tool; the records of its deployments stay."""
        return Tool.model_validate(self._client.request("DELETE", f"/tools/{tool_id}"))


class ToolDeploymentsResource(Resource):
    def record(
        self,
        *,
        tool_name: str,
        tool_key: str,
        environment: str,
        provider: str,
        tool_id: str,
        version: str,
        hash: str,
        tool_provider_config: dict[str, Any] | None = None,
        org_slug: str | None = None,
    ) -> ToolDeployment:
        """Create or update the record of `tool_key` in `environment`; a new version or hash moves
        the previous one into the record's history."""
        payload = body(
            RecordToolDeployment,
            org_slug=self._org(org_slug),
            tool_name=tool_name,
            tool_key=tool_key,
            environment=environment,
            provider=provider,
            tool_id=tool_id,
            version=version,
            hash=hash,
            tool_provider_config=tool_provider_config,
        )
        answer = self._client.request("POST", "/agents/tool-deployments", json=payload)
        return ToolDeployment.model_validate(answer)

    def list(
        self,
        *,
        tool_name: str | None = None,
        tool_key: str | None = None,
        environment: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[ToolDeployment]:
        params = {
            "orgSlug": self._org(org_slug),
            "toolName": tool_name,
            "toolKey": tool_key,
            "environment": environment,
            "limit": limit,
            "offset": offset,
        }
        answer = self._client.request("GET", "/agents/tool-deployment-records", params=params)
        return Page[ToolDeployment].model_validate(answer)
