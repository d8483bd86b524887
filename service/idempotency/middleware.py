"""The `Idempotency-Key` header on POST and PATCH: claim, run once, store the answer, replay it.

Requests without the header pass straight through: the only cost is looking the header up.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import anyio
from anyio import to_thread
from starlette.datastructures import Headers
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api_keys.service import ResolvedKey, resolve_key
from service.auth import presented_key
from service.crypto import Cipher, cipher_for
from service.db import Database
from service.errors import ServiceError, Unauthorized, error_response
from service.idempotency.service import (
    HEADER,
    KEY_LIFETIME,
    Claim,
    StoredAnswer,
    claim_key,
    fingerprint,
    finish,
    release,
)
from service.settings import Settings

METHODS = frozenset({"POST", "PATCH"})
# Where a request's claim travels to its session (service.deps), which marks it in its transaction.
CLAIM_SCOPE_KEY = "orgdeck.idempotency_claim"
# The key as the claim found it: the route checks its caller against it rather than look it up a
# second time a moment later in the same request (service.deps).
CALLER_SCOPE_KEY = "orgdeck.claimed_by"
KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")
REPLAYED_HEADER = (b"idempotent-replayed", b"true")


def _routed(scope: Scope) -> bool:
    """Whether a route takes this request's method at its path."""
    return any(route.matches(scope)[0] == Match.FULL for route in scope["app"].router.routes)


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, db: Database, settings: Settings) -> None:
        self.app = app
        self.db = db
        self.settings = settings

    @cached_property
    def cipher(self) -> Cipher:
        return cipher_for(self.settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        key = headers.get(HEADER)
        if key is None or not _routed(scope):
            # A method the path does not take is the router's 405, whatever the key.
            await self.app(scope, receive, send)
            return
        if not KEY_PATTERN.match(key):
            message = f"{HEADER} must be 1 to 255 visible ASCII characters, e.g. a UUID"
            details = [{"field": HEADER, "message": message, "type": "invalid_header"}]
            await error_response(400, message, "invalid_request", details)(scope, receive, send)
            return
        body = await _read_body(receive)
        receive = _replaying(body, receive)
        try:
            outcome = await self._claim(scope, headers, key, body)
        except ServiceError as exc:
            await error_response(exc.status, exc.message, exc.code, exc.details())(scope, receive, send)
            return
        if outcome is None:  # no valid key: the application answers 401 as for any request
            await self.app(scope, receive, send)
        elif isinstance(outcome, StoredAnswer):
            await _replay(outcome, send)
        else:
            await self._run_once(outcome, scope, receive, send)

    async def _claim(
        self, scope: Scope, headers: Headers, key: str, body: bytes
    ) -> Claim | StoredAnswer | None:
        try:
            api_key = presented_key(headers)
        except Unauthorized:
            return None
        if api_key is None:
            return None
        method, path = scope["method"], scope["path"]
        digest = fingerprint(method, path, scope.get("query_string", b"").decode("latin-1"), body)

        def claim() -> tuple[ResolvedKey, Claim | StoredAnswer] | None:
            # Not durable: the request's own (durable) commit writes the claim to disk with it, and
            # a claim lost in a crash before then had nothing committed under it.
            with self.db.session(write=True, durable=False) as session:
                try:
                    caller = resolve_key(session, api_key)
                except Unauthorized:
                    return None
                return caller, claim_key(
                    session,
                    cipher=self.cipher,
                    org_id=caller.org_id,
                    # The key presented is the caller: its answers are replayed to it alone.
                    caller_id=caller.id,
                    key=key,
                    fingerprint=digest,
                    method=method,
                    path=path,
                )

        claimed = await to_thread.run_sync(claim)
        if claimed is None:
            return None
        scope[CALLER_SCOPE_KEY], outcome = claimed
        return outcome

    async def _run_once(self, claim: Claim, scope: Scope, receive: Receive, send: Send) -> None:
        scope[CLAIM_SCOPE_KEY] = claim
        start: Message | None = None
        chunks: list[bytes] = []
        answered = False

        async def recording_send(message: Message) -> None:
            # The answer is stored before the caller sees it, so a caller that got it and sends the
            # request again gets it replayed rather than a 409.
            nonlocal start, answered
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or answered:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            assert start is not None
            answered = True
            answer = StoredAnswer(start["status"], _stored_headers(start), b"".join(chunks))
            await self._in_session(lambda session: finish(session, claim, answer, self.cipher))
            await send(start)
            await send({"type": "http.response.body", "body": answer.body})

        try:
            await self.app(scope, receive, recording_send)
        finally:
            if not answered:
                with anyio.CancelScope(shield=True):
                    await self._in_session(lambda session: release(session, claim))

    async def _in_session(self, work: Any) -> None:
        """Store an answer or free a key. Not durable: should a crash of the database lose it, the
        key says its request committed (a retry is told to look the result up) or still running
        (a retry takes it over when its lease ends), and nothing runs twice."""

        def run() -> None:
            with self.db.session(write=True, durable=False) as session:
                work(session)

        await to_thread.run_sync(run)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the application the body already read, then defers to the server."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _stored_headers(start: Message) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in start.get("headers", [])
        if name.lower() != b"content-length"
    ]


async def _replay(answer: StoredAnswer, send: Send) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers]
    headers += [(b"content-length", str(len(answer.body)).encode()), REPLAYED_HEADER]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


def document(schema: dict[str, Any]) -> None:
    """Declare the header on every POST and PATCH operation of an OpenAPI document, with its 409."""
    hours = int(KEY_LIFETIME.total_seconds() // 3600)
    parameter = {
        "name": HEADER,
        "in": "header",
        "required": False,
        "description": (
            f"Makes the request safe to retry: the same key with the same body within {hours} h answers "
            "the stored response (with `Idempotent-Replayed: true`) and does nothing again; with another "
            "body it is 400 `idempotency_key_reused`; while the first request runs, 409 "
            "`idempotency_key_in_use`. Keys are per caller (the API key presented): another caller's request "
            "with the same key is a request of its own. 1 to 255 visible ASCII characters."
        ),
        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
    }
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for path_item in schema.get("paths", {}).values():
        for method, operation in path_item.items():
            if method.upper() in METHODS:
                operation.setdefault("parameters", []).append(parameter)
                operation.setdefault("responses", {}).setdefault(
                    "409", {"description": f"A request with this {HEADER} is still running", **error}
                )
