"""What the service refuses, and why: one error base carrying status, code and message, a class
per kind. Any layer raises them; service.http.errors turns them into answers."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    status = 400
    code = "invalid_request"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code

    def details(self) -> list[dict[str, Any]]:
        return [{"field": self.field, "message": self.message, "type": self.code}] if self.field else []


class InvalidInput(ServiceError):
    """Input that is well-formed but not acceptable (names the field it is about)."""


class InvalidCursor(InvalidInput):
    """A `cursor` that no page of this service handed out."""

    def __init__(self) -> None:
        super().__init__("cursor is not a nextCursor this service returned", field="cursor")


class AlreadyExists(ServiceError):
    code = "already_exists"


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class InsufficientRole(Forbidden):
    code = "insufficient_role"

    def __init__(self, *, needed: str, held: str, action: str = "This action") -> None:
        super().__init__(f"{action} needs the {needed} role; this key acts as {held}")
        self.needed, self.held = needed, held


class ApprovalRequired(Forbidden):
    """A protected action called directly: it goes through a change request instead."""

    code = "approval_required"

    def __init__(self, *, rule: str, kind: str, field: str, payload: str = "this request's body") -> None:
        super().__init__(
            f"{rule}: this change needs approval. Open a change request with POST /change-requests "
            f"(kind '{kind}', payload: {payload}, and a reason); it applies once approved",
            field=field,
        )
        self.rule, self.kind = rule, kind


class PromotionRequired(Forbidden):
    """A deployment to an environment with `requirePromotion` of versions that have not run (long
    enough, without failing) in the environment it promotes from."""

    code = "promotion_required"

    def __init__(self, blocks: list[str]) -> None:
        super().__init__("; ".join(blocks), field="agentStableKeys")


class RefusalOnRecord(Forbidden):
    """A refusal that is itself on record: once the refused work is rolled back, `record_refusal`
    writes what must be kept of it in a transaction of its own (service.http.routing) and answers
    what its audit event (`audit_action`) names as its target."""

    audit_action = "refused"

    def record_refusal(self, session: Any) -> Any:
        raise NotImplementedError


class Conflict(ServiceError):
    """What is asked does not fit the state the thing is in now (a paused job paused again)."""

    status = 409
    code = "conflict"


class NotFound(ServiceError):
    status = 404
    code = "not_found"
