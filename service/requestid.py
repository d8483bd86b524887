"""Every response carries `X-Request-Id`: the caller's own when it sent a valid one, else a new id.

The id is also kept for the request's audit event, in a context variable every thread the request
runs in can read.
"""

from __future__ import annotations

import random
import re
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.ids import new_id

HEADER = b"x-request-id"
VALID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == HEADER), b"")
        request_id = given.decode() if VALID.match(given) else new_id("req", randbits=random.getrandbits)
        current_request_id.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (HEADER, request_id.encode())]
            await send(message)

        await self.app(scope, receive, send_with_id)
