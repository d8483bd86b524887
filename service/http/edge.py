"""What every request meets before its route, in one layer and one reading of its headers.

In order: its request id (every answer carries X-Request-Id, service.http.requestid), the size of
its body (413, service.http.bodylimit), its rate budget (429, service.http.ratelimit; none for
`exempt_paths`), the sanity of its input, its body read once (400, service.http.inputguard), and
who it comes from (its credential resolved once, service.http.auth). As separate middlewares these
cost a one-query read a tenth of its time: each was a call deeper for the request and for every
message of its answer, and each read the headers again. Once answered, the request is observed
(counted, timed, logged: service.http.observation).
"""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy.exc import DBAPIError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import Unauthorized
from service.http.auth import ANONYMOUS, STATE_KEY, Authenticated, Authentication, presented_credential
from service.http.bodylimit import BodyLimit
from service.http.errors import send_database_lost, send_error
from service.http.inputguard import Refusal, guarded_receive
from service.http.ratelimit import Limiter, identity_of
from service.http.requestid import HEADER as REQUEST_ID_HEADER
from service.http.requestid import current_request_id, request_id_for

Headers = dict[bytes, bytes]


class Observer(Protocol):
    """Told of every request as its answer starts (the route it matched is known) and once it ends."""

    def answering(self, scope: Scope) -> None: ...

    def __call__(self, scope: Scope, status: int, seconds: float) -> None: ...


class EdgeMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        body_limit: BodyLimit,
        limiter: Limiter | None,
        authentication: Authentication,
        exempt_paths: frozenset[str],
        list_parameters: frozenset[str],
        observe: Observer,
    ) -> None:
        self.app = app
        self.body_limit = body_limit
        self.limiter = limiter
        self.authentication = authentication
        self.exempt_paths = exempt_paths
        self.list_parameters = list_parameters
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(reversed(scope["headers"]))  # the first of a repeated header, as Starlette reads
        request_id = request_id_for(headers.get(REQUEST_ID_HEADER))
        current_request_id.set(request_id)
        # Grows with the rate limit's headers before the answer starts.
        added = [(REQUEST_ID_HEADER, request_id.encode())]
        started = time.perf_counter()
        # What the answer's status was; a request that raised before answering counts as a 500.
        answered = [500]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *added]
                answered[0] = message["status"]
                self.observe.answering(scope)
            await send(message)

        try:
            await self._answer(scope, receive, send_with_headers, headers, added)
        finally:
            self.observe(scope, answered[0], time.perf_counter() - started)

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send_with_headers: Send,
        headers: Headers,
        added: list[tuple[bytes, bytes]],
    ) -> None:
        declared = self.body_limit.declared(headers)
        if declared is None:

            async def limited(scope: Scope, receive: Receive, send: Send) -> None:
                await self._limited(scope, receive, send, headers, added)

            await self.body_limit.run_counted(limited, scope, receive, send_with_headers)
        elif declared > self.body_limit.max_bytes:
            await self.body_limit.refuse(send_with_headers)
        else:
            await self._limited(scope, receive, send_with_headers, headers, added)

    async def _limited(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers, added: list[tuple[bytes, bytes]]
    ) -> None:
        try:
            credential = presented_credential(headers)
        except Unauthorized as refusal:
            credential, authenticated = None, Authenticated(refusal=refusal)
        else:
            authenticated = ANONYMOUS
        if self.limiter is not None and scope["path"] not in self.exempt_paths:
            decision = await self.limiter.hit(identity_of(credential, scope.get("client")))
            added.extend(decision.headers())
            if not decision.allowed:
                message = (
                    f"Rate limit of {decision.limit} requests exceeded; retry in {decision.reset_seconds} s"
                )
                await send_error(send, 429, message, "rate_limited")
                return
        try:
            guarded = await guarded_receive(scope, headers, receive, self.list_parameters)
        except Refusal as refusal:
            await refusal.send(send)
            return
        if guarded is None:  # the client went away
            return
        if credential is not None:
            try:
                authenticated = await self.authentication.resolve(credential)
            except DBAPIError as lost:
                if not lost.connection_invalidated:
                    raise
                await send_database_lost(send, scope, lost)
                return
        scope.setdefault("state", {})[STATE_KEY] = authenticated
        await self.app(scope, guarded, send)
        await self.authentication.after_response(authenticated)
