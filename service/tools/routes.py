from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.common import DEFAULT_PAGE_SIZE, Page
from api.tools import CreateTool, RecordToolDeployment, Tool, ToolDeployment, UpdateTool
from service.http.deps import (
    LimitQuery,
    OffsetQuery,
    Operator,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router
from service.redaction.objects import redacted
from service.tools import service
from service.tools.models import ToolRow

router = api_router("/tools", tags=["Tools"])
ToolIdPath = Annotated[str, Path(alias="toolId", description="The tool's id.")]
# Tool deployment records live under /agents with the other deployment operations. Register this
# router before the agents' own, so that /agents/{stableKey} never captures these paths.
deployments_router = api_router("/agents", tags=["Tools"])


@router.post("", response_model=Tool)
def create_tool(body: CreateTool, caller: Operator, session: WriteSession) -> Tool:
    tool = service.create_tool(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return _tool(tool)


@router.get("", response_model=Page[Tool])
def list_tools(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Tool]:
    """The organization's tools by name."""
    tools, total = service.list_tools(session, org_id=caller.org_id_for(org_slug), limit=limit, offset=offset)
    return Page[Tool](items=[_tool(t) for t in tools], limit=limit, offset=offset, total=total)


@router.get("/{toolId}", response_model=Tool)
def get_tool(tool_id: ToolIdPath, caller: Viewer, session: ReadSession) -> Tool:
    """One tool of the key's organization (another organization's tool is 404)."""
    return _tool(service.get_tool(session, org_id=caller.org_id, tool_id=tool_id))


@router.patch("/{toolId}", response_model=Tool)
def update_tool(tool_id: ToolIdPath, body: UpdateTool, caller: Operator, session: WriteSession) -> Tool:
    """Change any of name, description and inputSchema; the toolKey is permanent."""
    tool = service.update_tool(session, org_id=caller.org_id, tool_id=tool_id, request=body)
    return _tool(tool)


@router.delete("/{toolId}", response_model=Tool)
def delete_tool(tool_id: ToolIdPath, caller: Operator, session: WriteSession) -> Tool:
    """Delete a tool; the records of its deployments stay."""
    return _tool(service.delete_tool(session, org_id=caller.org_id, tool_id=tool_id))


@deployments_router.post("/tool-deployments", response_model=ToolDeployment)
def record_tool_deployment(
    body: RecordToolDeployment, caller: Operator, session: WriteSession
) -> ToolDeployment:
    """Create or update the record of a tool in an environment (one per toolKey and environment).

    A new version or hash moves the previous deployment into the record's history.
    """
    recorded = service.record_tool_deployment(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return service.deployment_record(recorded)


@deployments_router.get("/tool-deployment-records", response_model=Page[ToolDeployment])
def list_tool_deployments(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    tool_name: str | None = Query(None, alias="toolName", max_length=200),
    tool_key: str | None = Query(None, alias="toolKey", max_length=128),
    environment: str | None = Query(None, description="An environment's name.", max_length=100),
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[ToolDeployment]:
    """Tool deployment records by toolKey and environment, each with its newest history."""
    records, total = service.list_tool_deployments(
        session,
        org_id=caller.org_id_for(org_slug),
        tool_name=tool_name,
        tool_key=tool_key,
        environment=environment,
        limit=limit,
        offset=offset,
    )
    return Page[ToolDeployment](
        items=[service.deployment_record(r) for r in records], limit=limit, offset=offset, total=total
    )


def _tool(row: ToolRow) -> Tool:
    """The tool as readers see it: the credentials in its inputSchema redacted."""
    tool = Tool.model_validate(row)
    return tool.model_copy(update={"input_schema": redacted(tool.input_schema)})
