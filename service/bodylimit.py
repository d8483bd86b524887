"""Refuse request bodies over the configured size with 413, before anything reads them whole."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import send_error


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.message = f"The request body is larger than {max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "0")
        if "transfer-encoding" not in headers and declared.isdigit():
            # The server reads no more than a declared length (none declared: no body), so only
            # the length needs checking; only a chunked body has to be counted as it arrives.
            if int(declared) > self.max_bytes:
                await send_error(send, 413, self.message, "payload_too_large")
            else:
                await self.app(scope, receive, send)
            return
        received = 0
        exceeded = refused = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                exceeded = True
                raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # Whatever the app made of the interrupted body (FastAPI turns it into a 400),
            # the caller gets the 413 that says what actually went wrong.
            nonlocal refused
            if not exceeded:
                await send(message)
            elif not refused:
                refused = True
                await send_error(send, 413, self.message, "payload_too_large")

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _TooLarge:
            if not refused:
                await send_error(send, 413, self.message, "payload_too_large")
