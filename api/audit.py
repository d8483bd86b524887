"""Wire models of the audit trail: who changed what, when, through which request."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

from pydantic import Field

from api.approvals import ChangeRequestRef
from api.common import OrgSlug, Page, QueryParameters, Record, Timestamp
from api.notifications import DateRange, Pagination
from api.resource import Resource


class AuditActor(Record):
    key_id: str | None = None
    key_name: str | None = None
    member_id: str | None = None
    member_email: str | None = None
    via: str | None = Field(
        None,
        description="oidc: signed in with the identity provider; workload: a trusted workload's token; "
        "worker: the background worker, of its own accord (a rollout it stopped or rolled back); else an API key.",
    )
    claims: dict[str, Any] | None = Field(
        None, description="A workload's token claims its conditions matched."
    )


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
    change_request: ChangeRequestRef | None = Field(
        None,
        description="For a change applied by an approved change request: the request, its requester "
        "(the actor) and its approvers.",
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


# GET /audit-events/stats covers at most this many days; without a start, the last default ones.
STATS_MAX_DAYS = 366
STATS_DEFAULT_DAYS = 30


class AuditStatsQuery(QueryParameters):
    """The period of GET /audit-events/stats: `dateRange`, at most 366 days; `end` defaults to now and
    `start` to 30 days before `end`; `actor`, `action` and `targetType` narrow it as they narrow the
    list of events."""

    org_slug: OrgSlug
    date_range: DateRange = DateRange()
    actor: str | None = Field(
        None, min_length=1, max_length=320, description="A member id or email, or a key id."
    )
    action: str | None = Field(None, min_length=1, max_length=100)
    target_type: str | None = Field(None, min_length=1, max_length=40)


class AuditExportQuery(QueryParameters):
    """The range of GET /audit-events/export: `dateRange` (both ends optional; `end` is at most a
    minute before now, and defaults to that)."""

    org_slug: OrgSlug
    date_range: DateRange = DateRange()


class ActionDayCount(Record):
    day: date = Field(description="A UTC day.")
    action: str
    count: int


class ActorCount(Record):
    """The changes of one actor: a member (by email) or, for a service key, the key."""

    member_id: str | None = None
    member_email: str | None = None
    key_id: str | None = None
    key_name: str | None = None
    count: int


class AuditStats(Record):
    """Changes over a period, counted in the database: chart-ready, one row per day and action."""

    start: Timestamp
    end: Timestamp
    total: int
    per_day: list[ActionDayCount] = Field(
        description="Days with changes, oldest first; within a day, actions by name. Days without are left out."
    )
    per_actor: list[ActorCount] = Field(description="Actors with changes, most changes first.")


class AuditResource(Resource):
    def list(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        target_type: str | None = None,
        target_id: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
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
            "dateRange[start]": start.isoformat() if start else None,
            "dateRange[end]": end.isoformat() if end else None,
            "pagination[limit]": limit,
            "cursor": cursor,
        }
        answer = self._client.request(
            "GET", "/audit-events", params={k: v for k, v in params.items() if v is not None}
        )
        return Page[AuditEvent].model_validate(answer)

    def export(
        self, *, start: datetime | None = None, end: datetime | None = None, org_slug: str | None = None
    ) -> Iterator[str]:
        """Every event from `start` (inclusive; default: the first) to `end` (exclusive; default and
        at most: a minute ago), oldest first: each line an AuditEvent's JSON, streamed as it arrives.
        The export is on record; once read to its end, retention may prune what it covered."""
        params = {
            "orgSlug": self._org(org_slug),
            "dateRange[start]": start.isoformat() if start else None,
            "dateRange[end]": end.isoformat() if end else None,
        }
        return self._client.stream_lines("/audit-events/export", params=params)

    def stats(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        actor: str | None = None,
        action: str | None = None,
        target_type: str | None = None,
        org_slug: str | None = None,
    ) -> AuditStats:
        """Changes per day by action, and per actor, from `start` (inclusive) to `end` (exclusive),
        of the given actor, action and target type."""
        params = {
            "orgSlug": self._org(org_slug),
            "dateRange[start]": start.isoformat() if start else None,
            "dateRange[end]": end.isoformat() if end else None,
            "actor": actor,
            "action": action,
            "targetType": target_type,
        }
        answer = self._client.request(
            "GET", "/audit-events/stats", params={k: v for k, v in params.items() if v is not None}
        )
        return AuditStats.model_validate(answer)
