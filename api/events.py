"""Wire models of events: what happened in an organization, the input of notifications."""

from __future__ import annotations

from typing import Any, Literal, get_args

from api.common import Record, Timestamp

EventType = Literal[
    "agent.stale",
    "agent.drifted",
    "agent.error",
    "deployment.complete",
    "deployment.error",
    "deployment.partial",
    "deployment.paused",
    "deployment.resumed",
    "deployment.aborted",
    "deployment.rolled_back",
    "change_request.opened",
    "change_request.decided",
    "policy.violation",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


class Event(Record):
    id: str
    type: EventType
    org_slug: str
    occurred_at: Timestamp
    payload: dict[str, Any]
