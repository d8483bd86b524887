"""Wire models of the service itself: health, the caller's identity and what each operation needs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from api.common import Record
from api.members import Role


class Health(Record):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unreachable"]
    version: str = Field(description="The service's release, e.g. `0.2.0`.")


class Liveness(Record):
    status: Literal["ok"]


class ReadinessChecks(Record):
    database: Literal["ok", "unreachable"]
    migrations: Literal["ok", "behind", "newer than the code", "unknown"] = Field(
        description="Whether the schema is at this release's migrations' head (unknown: no database)."
    )
    worker: Literal["ok", "stale", "not running"] = Field(
        description="The in-process worker's last round: recent (ok), too long ago (stale), or no "
        "worker in this process (not running: ORGDECK_RUN_WORKER=false, which readiness accepts)."
    )


class Readiness(Record):
    status: Literal["ready", "not ready"]
    checks: ReadinessChecks


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
    via: str = Field(
        "key",
        description="key: an API key; oidc: a person's token from the identity provider (keyId is "
        "their member id); workload: a trusted workload's token (keyId is the workload's id).",
    )


def least_roles(document: dict[str, Any]) -> dict[str, Role | None]:
    """Each operation's least role by operationId, read from the service's OpenAPI document
    (`x-least-role`); None for an operation anyone may call (health, a public registry's reads)."""
    return {
        operation["operationId"]: operation.get("x-least-role")
        for item in document.get("paths", {}).values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
