"""Wire models of the service itself: health and the caller's identity."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Record
from api.members import Role


class Health(Record):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unreachable"]
    version: str


class CallerMember(Record):
    id: str
    email: str
    name: str


class Caller(Record):
    """Who a key belongs to: the organization it is scoped to, the key, its member and what it may do."""

    org_slug: str
    org_name: str
    key_id: str
    key_name: str
    role: Role = Field(description="What the key may do now: its role, lowered to its member's current role.")
    key_role: Role
    member: CallerMember | None = Field(
        None, description="The member of a personal key; none for a service key."
    )
