"""The service's log lines: text for a terminal, or one JSON object per line for a log collector
(ORGDECK_LOG_FORMAT=json), and the access line every request leaves when ORGDECK_ACCESS_LOG is on.

Every record is redacted when it is made (service/redaction/logs.py), before it reaches either
format; the fields added here (a request's id, route template, organization slug and actor id) name
things, never carry a credential.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

ACCESS = logging.getLogger("orgdeck.access")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# Record attributes (set through `extra=`) a JSON line carries when a record has them.
REQUEST_FIELDS = ("org", "actorId", "route", "method", "status", "durationMs")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the request's id when the record
    was made while serving one, the request's fields when it has them, and the exception if any."""

    def __init__(self, request_id: Callable[[], str | None]) -> None:
        super().__init__()
        self._request_id = request_id

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "requestId", None) or self._request_id()
        if request_id:
            entry["requestId"] = request_id
        entry.update((name, getattr(record, name)) for name in REQUEST_FIELDS if hasattr(record, name))
        if record.exc_info or record.exc_text:
            # The redacting record factory has written exc_text already; format it only if not.
            entry["exception"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(log_format: str, level: str, request_id: Callable[[], str | None]) -> None:
    """One handler on the root logger, on stderr, in the chosen format (every library's records,
    uvicorn's included, reach it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter(request_id) if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def log_request(
    *, method: str, route: str, status: int, seconds: float, org: str | None, actor_id: str | None
) -> None:
    duration_ms = round(seconds * 1000, 2)
    fields: dict[str, Any] = {"route": route, "method": method, "status": status, "durationMs": duration_ms}
    if org:
        fields |= {"org": org, "actorId": actor_id}
    ACCESS.info("%s %s %s %.2f ms", method, route, status, duration_ms, extra=fields)
