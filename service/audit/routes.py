from __future__ import annotations

from fastapi import Request
from starlette.responses import Response, StreamingResponse

from api.audit import AuditEvent, AuditExportQuery, AuditQuery, AuditStats, AuditStatsQuery
from api.common import Page
from service.audit import export, service
from service.http.deps import Admin, ReadSession, Viewer, WriteSession
from service.http.query import (
    FLATTENED_DATE_RANGE,
    date_range_parameter,
    paged_query_openapi,
    parameter,
    parse_query,
)
from service.http.responses import rendered_json, splice_json
from service.http.routing import api_router

router = api_router("", tags=["Audit trail"])

SCALARS = ("orgSlug", "actor", "action", "targetType", "targetId", "cursor")
STATS_SCALARS = ("orgSlug", "actor", "action", "targetType")
NARROWING = [
    parameter("actor", "Only the events of this member (id or email) or key (id).", {"type": "string"}),
    parameter("action", "Only this action: an operation's id, e.g. `createAgent`.", {"type": "string"}),
    parameter("targetType", "Only events on targets of this type, e.g. `agent`.", {"type": "string"}),
]
QUERY_OPENAPI = paged_query_openapi(
    "events", [*NARROWING, parameter("targetId", "Only events on this target.", {"type": "string"})]
)

STATS_OPENAPI = {
    "parameters": [
        parameter("orgSlug", "The organization the request acts on.", {"type": "string"}, required=True),
        date_range_parameter("changes"),
        *FLATTENED_DATE_RANGE,
        *NARROWING,
    ]
}


@router.get("/audit-events", response_model=Page[AuditEvent], openapi_extra=QUERY_OPENAPI)
def list_audit_events(request: Request, caller: Viewer, session: ReadSession) -> Response:
    """Who changed what, newest first; `nextCursor` walks on (no total is counted)."""
    query = parse_query(request, AuditQuery, SCALARS)
    page = service.list_events(session, org_id=caller.org_id_for(query.org_slug), query=query)
    frame = Page[AuditEvent](
        items=[], limit=query.pagination.limit, offset=query.pagination.offset, next_cursor=page.next_cursor
    )
    return rendered_json(splice_json(frame, items=f"[{','.join(page.events)}]"))


@router.get("/audit-events/stats", response_model=AuditStats, openapi_extra=STATS_OPENAPI)
def audit_stats(request: Request, caller: Viewer, session: ReadSession) -> AuditStats:
    """Changes per UTC day by action, and per actor: the Activity chart, counted in the database.

    `dateRange` covers at most 366 days; `end` defaults to now and `start` to 30 days before `end`;
    `actor`, `action` and `targetType` count only the events the list would show with them.
    """
    query = parse_query(request, AuditStatsQuery, STATS_SCALARS)
    return service.stats(session, org_id=caller.org_id_for(query.org_slug), query=query)


EXPORT_OPENAPI = {
    "parameters": [
        parameter("orgSlug", "The organization the request acts on.", {"type": "string"}, required=True),
        date_range_parameter("events"),
        *FLATTENED_DATE_RANGE,
    ],
    "responses": {
        "200": {
            "description": "One AuditEvent per line, oldest first.",
            "content": {"application/x-ndjson": {"schema": {"$ref": "#/components/schemas/AuditEvent"}}},
        }
    },
}


@router.get("/audit-events/export", response_class=StreamingResponse, openapi_extra=EXPORT_OPENAPI)
def export_audit_events(request: Request, caller: Admin, session: WriteSession) -> StreamingResponse:
    """Every event of the range, oldest first, streamed as NDJSON (any number of them, in constant
    memory). The export is on record (who, which range); once streamed to its end, retention may
    prune the events it covered (ORGDECK_RETENTION_AUDIT_EVENTS_DAYS)."""
    query = parse_query(request, AuditExportQuery, ("orgSlug",))
    started = export.start_export(
        session,
        org_id=caller.org_id_for(query.org_slug),
        key_id=caller.key_id,
        member_email=caller.member_email,
        query=query,
    )
    lines = export.event_lines(request.app.state.db, started)
    return StreamingResponse(lines, media_type="application/x-ndjson")
