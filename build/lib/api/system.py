"""Wire models of the service itself: health and the caller's identity."""

from __future__ import annotations

from typing import Literal

from api.common import Record


class Health(Record):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unreachable"]
    version: str


class Caller(Record):
    """Who a key belongs to: the organization it is scoped to and the key itself."""

    org_slug: str
    org_name: str
    key_id: str
    key_name: str
