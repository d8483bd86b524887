"""The `Idempotency-Key` header on POST and PATCH: claim, run once, store the answer, replay it.

Requests without the header pass straight through: the only cost is looking the header up. A key
belongs to the caller the edge resolved (service.http.auth), and is fingerprinted with the body the
edge read (service.http.inputguard); a request without a working credential passes through to its
route's 401.
"""

from __future__ import annotations

import functools
import re
from functools import cached_property
from typing import Any

import anyio
from anyio import to_thread
from starlette.datastructures import Headers
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ServiceError
from service.http.auth import authenticated
from service.http.deps import ON_COMMIT_SCOPE_KEY
from service.http.errors import error_response
from service.http.inputguard import request_body
from service.idempotency.service import (
    HEADER,
    KEY_LIFETIME,
    Claim,
    StoredAnswer,
    claim_key,
    fingerprint,
    finish,
    mark_committed,
    release,
)
from service.settings import Settings
from service.storage.crypto import Cipher, cipher_for
from service.storage.db import Database

METHODS = frozenset({"POST", "PATCH"})
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
        key = Headers(scope=scope).get(HEADER)
        if key is None or not _routed(scope):
            # A method the path does not take is the router's 405, whatever the key.
            await self.app(scope, receive, send)
            return
        if not KEY_PATTERN.match(key):
            message = f"{HEADER} must be 1 to 255 visible ASCII characters, e.g. a UUID"
            details = [{"field": HEADER, "message": message, "type": "invalid_header"}]
            await error_response(400, message, "invalid_request", details)(scope, receive, send)
            return
        try:
            outcome = await self._claim(scope, key)
        except ServiceError as exc:
            await error_response(exc.status, exc.message, exc.code, exc.details())(scope, receive, send)
            return
        if outcome is None:  # no caller: the route answers 401 as for any request
            await self.app(scope, receive, send)
        elif isinstance(outcome, StoredAnswer):
            await _replay(outcome, send)
        else:
            await self._run_once(outcome, scope, receive, send)

    async def _claim(self, scope: Scope, key: str) -> Claim | StoredAnswer | None:
        caller = authenticated(scope).caller
        if caller is None:
            return None
        method, path = scope["method"], scope["path"]
        digest = fingerprint(
            method, path, scope.get("query_string", b"").decode("latin-1"), request_body(scope)
        )

        def claim() -> Claim | StoredAnswer:
            # Not durable: the request's own (durable) commit writes the claim to disk with it, and
            # a claim lost in a crash before then had nothing committed under it.
            with self.db.session(write=True, durable=False) as session:
                return claim_key(
                    session,
                    cipher=self.cipher,
                    org_id=caller.org_id,
                    # The key presented is the caller: its answers are replayed to it alone.
                    caller_id=caller.key_id,
                    key=key,
                    fingerprint=digest,
                    method=method,
                    path=path,
                )

        return await to_thread.run_sync(claim)

    async def _run_once(self, claim: Claim, scope: Scope, receive: Receive, send: Send) -> None:
        # Marked in the transaction of the request's work: both commit, or neither.
        scope[ON_COMMIT_SCOPE_KEY] = functools.partial(mark_committed, claim=claim)
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
