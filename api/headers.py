"""HTTP header conventions shared by the client and the service: pure functions, no transport."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

RETRY_AFTER_HEADER = "Retry-After"


def retry_after_seconds(value: str | None) -> float | None:
    """The wait a `Retry-After` value asks for (seconds or an HTTP date), or None without one."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
