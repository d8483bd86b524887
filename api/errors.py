"""Typed errors of the Orgdeck API, one class per status, mapped in one place."""

from __future__ import annotations

from collections.abc import Sequence

from api.common import ErrorDetail


class ApiError(Exception):
    """An error answer from the service (or no answer at all, with status 0).

    `details` name the fields at fault (`field` in wire form, as `name`, `tags.2` or
    `webhookUrl`), each with its `message` and `type`, so that a form can show each message next
    to its field.
    """

    status: int = 0
    default_code = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        details: Sequence[ErrorDetail] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.code = code or self.default_code
        self.details = list(details)
        self.retry_after = retry_after

    def __str__(self) -> str:
        prefix = f"{self.status} " if self.status else ""
        return f"{prefix}{self.code}: {self.message}"


class ConnectionFailed(ApiError):
    default_code = "connection_failed"


class BadRequest(ApiError):
    status = 400
    default_code = "invalid_request"


class Unauthorized(ApiError):
    status = 401
    default_code = "unauthorized"


class Forbidden(ApiError):
    status = 403
    default_code = "forbidden"


class NotFound(ApiError):
    status = 404
    default_code = "not_found"


class Conflict(ApiError):
    status = 409
    default_code = "conflict"


class PayloadTooLarge(ApiError):
    status = 413
    default_code = "payload_too_large"


class RateLimited(ApiError):
    status = 429
    default_code = "rate_limited"


class ServerError(ApiError):
    status = 500
    default_code = "internal_error"


_BY_STATUS: dict[int, type[ApiError]] = {
    cls.status: cls
    for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge, RateLimited)
}


def error_for_status(status: int) -> type[ApiError]:
    """The error class for an HTTP status; any other 5xx is a ServerError, anything else an ApiError."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError
