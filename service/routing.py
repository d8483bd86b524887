"""How every route runs: its whole work in one trip through the thread pool, in one transaction.

FastAPI runs each blocking dependency and the route function in a worker thread of their own:
opening the session, resolving the key, the function and the commit would be four trips for a
one-query read, each a wait for a thread and a handover of the GIL. Routes are made by `Route`
instead, which wraps a route's function so that one trip does it all, in order: resolve the
caller's key and check the role the route declares, run the function, append the audit event if it
wrote something, mark its Idempotency-Key, commit and close. The wrapper is a coroutine that hands
that work to the loop's executor itself, so FastAPI neither sends it to anyio's thread pool nor
sends the answer's serialization on a second trip. The dependencies only gather what that
needs, without blocking: a session not yet connected (`DbSession`), the key presented and the role
required (`Viewer`, `Operator`…).

A route function that takes `caller` must take `session`; a route that writes must take both (its
audit event needs them). Both are checked when the route is made, so a route cannot skip them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session
from starlette.responses import Response

from service.audit.recording import WRITE_METHODS, record
from service.auth import presented_key
from service.db import Database
from service.deps import CLAIM_INFO_KEY, PUBLIC_READ, PendingCaller, least_role
from service.errors import ServiceError, service_error_response, validation_error_response
from service.idempotency.service import mark_committed
from service.inputguard import read_json
from service.openapi_ids import camel_case, operation_id
from service.responses import rendered_json
from service.routeindex import API_PREFIX


def api_router(prefix: str, tags: list[str]) -> APIRouter:
    """An area's router: its routes' paths are whole (under API_PREFIX), made by `Route` and named
    by their function (service.openapi_ids)."""
    return APIRouter(
        route_class=Route, prefix=API_PREFIX + prefix, tags=tags, generate_unique_id_function=operation_id
    )


class Route(APIRoute):
    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        writes = bool(WRITE_METHODS & set(kwargs.get("methods") or ()))
        parameters = inspect.signature(endpoint).parameters
        if (writes or "caller" in parameters) and not {"caller", "session"} <= parameters.keys():
            raise TypeError(f"{endpoint.__qualname__} must take `caller` and `session`")
        if "session" in parameters:
            action = camel_case(kwargs.get("name") or endpoint.__name__) if writes else None
            endpoint = _in_one_transaction(endpoint, audited_as=action, answers=kwargs.get("response_model"))
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def reading_json_as_the_guard_does(request: Request) -> Response:
            return await handler(GuardedJsonRequest(request.scope, request.receive))

        return reading_json_as_the_guard_does


class GuardedJsonRequest(Request):
    """A request whose JSON body FastAPI reads as the input guard does (service.inputguard).
    Starlette's own reading raises a ValueError on an integer of thousands of digits (FastAPI's
    catch-all 400, with no code of ours), which the guard refuses in valid JSON but leaves, with a
    syntax error after it, to the route: read so, the syntax error is told as any other."""

    async def json(self) -> Any:
        return read_json(await self.body())


def _in_one_transaction(
    endpoint: Callable[..., Any], *, audited_as: str | None, answers: Any
) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(endpoint):
        raise TypeError(f"{endpoint.__qualname__} uses the database: it must be a plain `def`")

    def run(arguments: dict[str, Any]) -> Any:
        session: Session = arguments["session"]
        try:
            caller = arguments.get("caller")
            if isinstance(caller, PendingCaller):
                arguments["caller"] = caller.resolve(session)
            result = endpoint(**arguments)
            if audited_as is not None:
                record(session, arguments["caller"], audited_as, result, arguments)
            if (claim := session.info.get(CLAIM_INFO_KEY)) is not None:
                # An idempotent request's key is marked in the transaction of its work: both or neither.
                mark_committed(session, claim)
            session.commit()
            # An answer already of the route's response model is sent as it is: validating and
            # converting it again would cost more than a small read.
            return rendered_json(result) if type(result) is answers else result
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @functools.wraps(endpoint)
    async def in_a_worker_thread(**arguments: Any) -> Any:
        # The loop's executor (sized by `threads`, service.app) straight away: anyio's trip costs
        # a tenth of a one-query read in finding the running loop and taking a limiter's token.
        # The request's context goes along: the audit event reads its request id.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(None, context.run, run, arguments)

    return in_a_worker_thread


async def authorized_before_validated(request: Request, exc: Exception) -> Response:
    """Invalid input to a route its caller may not use is refused for who is calling, not for what
    was sent: the key and the role are checked before the input's errors are told (the route's own
    check runs only once its input is valid)."""
    assert isinstance(exc, RequestValidationError)
    route = request.scope.get("route")
    role = least_role(route.dependant) if isinstance(route, APIRoute) else None
    key = presented_key(request.headers) if role not in (None, PUBLIC_READ) else None
    if key is not None:
        try:
            await run_in_threadpool(_check_role, request.app.state.db, key, role)
        except ServiceError as refused:
            return service_error_response(refused)
    return await validation_error_response(request, exc)


def _check_role(db: Database, key: str, role: str) -> None:
    with db.session() as session:
        PendingCaller(db, background=None, key=key, role=role).resolve(session)
