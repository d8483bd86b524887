"""Wire models of the audit trail: who changed what, when, through which request."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.common import OrgSlug, Page, QueryParameters, Record, Timestamp
from api.notifications import DateRange, Pagination
from api.resource import Resource


class AuditActor(Record):
    key_id: str | None = None
    key_name: str | None = None
    member_id: str | None = None
    member_email: str | None = None


class AuditTarget(Record):
    type: str | None = None
    id: str | None = None
    name: str | None = None


class AuditEvent(Record):
    """One change: appended in the transaction that made it, never changed or removed."""

    id: str
    occurred_at: Timestamp
    actor: AuditActor
    action: str = Field(description="The id of the operation that made the change, e.g. createAgentVersion.")
    target: AuditTarget
    request_id: str | None = None
    changes: dict[str, Any] = Field(
        description="The fields the request set; secrets as [redacted], URLs by host."
    )


class AuditQuery(QueryParameters):
    """The filters of GET /audit-events, whichever query encoding carried them."""

    org_slug: OrgSlug
    actor: str | None = Field(
        None, min_length=1, max_length=320, description="A member id or email, or a key id."
    )
    action: str | None = Field(None, min_length=1, max_length=100)
    target_type: str | None = Field(None, min_length=1, max_length=40)
    target_id: str | None = Field(None, min_length=1, max_length=200)
    date_range: DateRange = DateRange()
    pagination: Pagination = Pagination()
    cursor: str | None = Field(None, max_length=40, description="A `nextCursor` from a previous page.")


class AuditResource(Resource):
    def list(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target_type: str | None = None,
        target_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        org_slug: str | None = None,
    ) -> Page[AuditEvent]:
        params = {
            "orgSlug": self._org(org_slug),
            "actor": actor,
            "action": action,
            "targetType": target_type,
            "targetId": target_id,
            "pagination[limit]": limit,
            "cursor": cursor,
        }
        answer = self._client.request(
            "GET", "/audit-events", params={k: v for k, v in params.items() if v is not None}
        )
        return Page[AuditEvent].model_validate(answer)
