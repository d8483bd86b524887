"""Refuse request bodies over the configured size with 413, before anything reads them whole."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.http.errors import send_error


class _TooLarge(Exception):
    pass


class BodyLimit:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.message = f"The request body is larger than {max_bytes} bytes"

    def declared(self, headers: Mapping[bytes, bytes]) -> int | None:
        """The body's declared length, when that is all there is to check: the server reads no
        more than a declared length (none declared: no body). A chunked body has to be counted."""
        if b"transfer-encoding" in headers:
            return None
        declared = headers.get(b"content-length", b"0")
        return int(declared) if declared.isdigit() else None

    async def refuse(self, send: Send) -> None:
        await send_error(send, 413, self.message, "payload_too_large")

    async def run_counted(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run `app` on a body counted as it arrives, refused once it grows past the limit."""
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
                await self.refuse(send)

        try:
            await app(scope, counting_receive, guarded_send)
        except _TooLarge:
            if not refused:
                await self.refuse(send)
