"""What applying an approved change produced, shared by every kind's applier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from api.common import Request


@dataclass(frozen=True)
class Applied:
    """What applying produced (the request's `result`), and the direct call it made: its operation
    id (`action`), its body and its answer, which the change's audit event records."""

    result: dict[str, Any]
    action: str
    body: Request | None
    answer: BaseModel
