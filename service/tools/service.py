"""Tools of an organization, and the records of which version of each runs in which environment."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.common import patched_fields
from api.tools import (
    HISTORY_SHOWN,
    CreateTool,
    PreviousDeployment,
    RecordToolDeployment,
    ToolDeployment,
    UpdateTool,
)
from service.environments.models import EnvironmentRow
from service.environments.protection import require_review_of_environment
from service.environments.service import find_environment_by_name
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.hooks import Hook
from service.redaction.objects import redacted, restored
from service.storage.db import insert_unless_taken, utcnow
from service.tools.models import ToolDeploymentHistoryRow, ToolDeploymentRow, ToolRow

# What runs with a tool drifts when what is deployed of it moves.
record_moved: Hook[None] = Hook(
    "a tool's deployed version or hash changed in an environment", attached_by="service.deployments.states"
)


def create_tool(session: Session, *, org_id: str, request: CreateTool) -> ToolRow:
    tool = ToolRow(
        org_id=org_id,
        name=request.name,
        tool_key=request.tool_key,
        description=request.description,
        input_schema=restored(request.input_schema, {}, field="inputSchema"),
    )
    if not insert_unless_taken(session, tool):
        raise AlreadyExists(
            f"A tool with key '{request.tool_key}' already exists in this organization", field="toolKey"
        )
    return tool


def list_tools(session: Session, *, org_id: str, limit: int, offset: int) -> tuple[list[ToolRow], int]:
    query = select(ToolRow).where(ToolRow.org_id == org_id)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    page = session.scalars(query.order_by(ToolRow.name, ToolRow.id).limit(limit).offset(offset))
    return list(page), total


def get_tool(session: Session, *, org_id: str, tool_id: str) -> ToolRow:
    """A tool of the organization; another organization's tool is not found, exactly like a missing one."""
    tool = session.scalar(select(ToolRow).where(ToolRow.id == tool_id, ToolRow.org_id == org_id))
    if tool is None:
        raise NotFound(f"No tool '{tool_id}' in this organization", field="toolId")
    return tool


def update_tool(session: Session, *, org_id: str, tool_id: str, request: UpdateTool) -> ToolRow:
    """Apply the fields the request sets; a credential sent back as its placeholder keeps its value."""
    tool = get_tool(session, org_id=org_id, tool_id=tool_id)
    changes = patched_fields(request)
    if "input_schema" in changes:
        changes["input_schema"] = restored(changes["input_schema"], tool.input_schema, field="inputSchema")
    for field, value in changes.items():
        setattr(tool, field, value)
    session.flush()
    return tool


def delete_tool(session: Session, *, org_id: str, tool_id: str) -> ToolRow:
    """Delete a tool. Its deployment records stay: they say what ran, whatever the catalogue says now."""
    tool = get_tool(session, org_id=org_id, tool_id=tool_id)
    session.delete(tool)
    session.flush()
    return tool


@dataclass(frozen=True)
class DeploymentWithHistory:
    record: ToolDeploymentRow
    history: list[ToolDeploymentHistoryRow]
    history_count: int


def record_tool_deployment(
    session: Session, *, org_id: str, request: RecordToolDeployment, reviewed: bool = False
) -> DeploymentWithHistory:
    """Create or update the record of a tool in an environment; a protected environment's only by an
    approved change request (`reviewed`).

    A different version or hash moves what was deployed into the history; the same version and hash
    only refresh the descriptive fields (name, config), so re-sending a record is harmless, even one
    read back with its credentials redacted (their placeholders keep the stored values).
    """
    tool_key = request.tool_key
    target = record_environment(session, org_id=org_id, name=request.environment)
    if not reviewed:
        require_review_of_environment(target, "toolDeployment", field="environment")
    version, hash = request.version, request.hash
    deployed = {"provider": request.provider, "tool_id": request.tool_id, "version": version, "hash": hash}
    record = find_record(session, environment_id=target.id, tool_key=tool_key, lock=True)
    config = restored(
        request.tool_provider_config,
        record.tool_provider_config if record is not None else None,
        field="toolProviderConfig",
    )
    described = {"tool_name": request.tool_name, "tool_provider_config": config}
    if record is None:
        created = ToolDeploymentRow(
            org_id=org_id, environment_id=target.id, tool_key=tool_key, **deployed, **described
        )
        if insert_unless_taken(session, created):
            record_moved(session, environment_id=target.id, tool_key=tool_key)
            return _with_history(session, [created])[0]
        # A concurrent request created it meanwhile: update that one instead.
        record = find_record(session, environment_id=target.id, tool_key=tool_key, lock=True)
        assert record is not None
    moved = (record.version, record.hash) != (version, hash)
    if moved:
        now = utcnow()
        session.add(
            ToolDeploymentHistoryRow(
                record_id=record.id,
                provider=record.provider,
                tool_id=record.tool_id,
                version=record.version,
                hash=record.hash,
                deployed_at=record.deployed_at,
                replaced_at=now,
            )
        )
        record.deployed_at = now
    for field, value in {**deployed, **described}.items():
        setattr(record, field, value)
    session.flush()
    if moved:
        record_moved(session, environment_id=target.id, tool_key=tool_key)
    return _with_history(session, [record])[0]


def list_tool_deployments(
    session: Session,
    *,
    org_id: str,
    tool_name: str | None,
    tool_key: str | None,
    environment: str | None,
    limit: int,
    offset: int,
) -> tuple[list[DeploymentWithHistory], int]:
    """Records by tool key then environment name, each with its newest history."""
    query = (
        select(ToolDeploymentRow)
        .join(EnvironmentRow, EnvironmentRow.id == ToolDeploymentRow.environment_id)
        .where(ToolDeploymentRow.org_id == org_id)
    )
    if tool_name is not None:
        query = query.where(ToolDeploymentRow.tool_name == tool_name)
    if tool_key is not None:
        query = query.where(ToolDeploymentRow.tool_key == tool_key)
    if environment is not None:
        query = query.where(EnvironmentRow.name == environment)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    ordered = query.order_by(ToolDeploymentRow.tool_key, EnvironmentRow.name).limit(limit).offset(offset)
    return _with_history(session, list(session.scalars(ordered))), total


def record_environment(session: Session, *, org_id: str, name: str) -> EnvironmentRow:
    """The environment a tool deployment record names (by name), which must exist."""
    environment = find_environment_by_name(session, org_id=org_id, name=name)
    if environment is None:
        raise InvalidInput(f"No environment named '{name}' in this organization", field="environment")
    return environment


def find_record(
    session: Session, *, environment_id: str, tool_key: str, lock: bool = False
) -> ToolDeploymentRow | None:
    """The record of a tool in an environment; `lock`ed until the transaction ends when it is to be
    updated, so that concurrent updates queue instead of losing history."""
    query = select(ToolDeploymentRow).where(
        ToolDeploymentRow.environment_id == environment_id, ToolDeploymentRow.tool_key == tool_key
    )
    return session.scalar(query.with_for_update(of=ToolDeploymentRow) if lock else query)


def _with_history(session: Session, records: list[ToolDeploymentRow]) -> list[DeploymentWithHistory]:
    """Each record with its newest HISTORY_SHOWN previous deployments and their count: two queries."""
    ids = [record.id for record in records]
    if not ids:
        return []
    counts = dict(
        session.execute(
            select(ToolDeploymentHistoryRow.record_id, func.count())
            .where(ToolDeploymentHistoryRow.record_id.in_(ids))
            .group_by(ToolDeploymentHistoryRow.record_id)
        ).all()
    )
    newest_first = func.row_number().over(
        partition_by=ToolDeploymentHistoryRow.record_id,
        order_by=(ToolDeploymentHistoryRow.replaced_at.desc(), ToolDeploymentHistoryRow.id.desc()),
    )
    ranked = (
        select(ToolDeploymentHistoryRow, newest_first.label("rank"))
        .where(ToolDeploymentHistoryRow.record_id.in_(ids))
        .subquery()
    )
    shown = session.scalars(
        select(ToolDeploymentHistoryRow)
        .join(ranked, ranked.c.id == ToolDeploymentHistoryRow.id)
        .where(ranked.c.rank <= HISTORY_SHOWN)
        .order_by(ToolDeploymentHistoryRow.replaced_at.desc(), ToolDeploymentHistoryRow.id.desc())
    )
    by_record: dict[str, list[ToolDeploymentHistoryRow]] = {record_id: [] for record_id in ids}
    for entry in shown:
        by_record[entry.record_id].append(entry)
    return [
        DeploymentWithHistory(
            record=record, history=by_record[record.id], history_count=counts.get(record.id, 0)
        )
        for record in records
    ]


def deployment_record(recorded: DeploymentWithHistory) -> ToolDeployment:
    """The record as readers see it: the credentials in its toolProviderConfig redacted."""
    record = recorded.record
    columns = {column.key: getattr(record, column.key) for column in ToolDeploymentRow.__table__.columns}
    return ToolDeployment.model_validate(
        {
            **columns,
            "tool_provider_config": redacted(record.tool_provider_config),
            "environment": record.environment.name,
            "history": [PreviousDeployment.model_validate(entry) for entry in recorded.history],
            "history_count": recorded.history_count,
        }
    )
