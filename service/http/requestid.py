"""Every response carries `X-Request-Id`: the caller's own when it sent a valid one, else a new id.

The id is also kept for the request's audit event, in a context variable every thread the request
runs in can read. Set by service.http.edge.
"""

from __future__ import annotations

import random
import re
from contextvars import ContextVar

from service.storage.ids import new_id

HEADER = b"x-request-id"
VALID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)


def request_id_for(given: bytes | None) -> str:
    """The caller's id if it sent a valid one, else a new one (unguessable it need not be)."""
    return given.decode() if given and VALID.match(given) else new_id("req", randbits=random.getrandbits)
