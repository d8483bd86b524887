"""How a route runs: its function and its unit of work, in one trip to a worker thread.

A route declares its unit of work in its signature: `session: ReadSession` for a route that only
reads, `session: WriteSession` for one that writes (service.http.deps). `Route` wraps such a
route's function so that one trip does the whole of it, in order: run the function; for a write,
append its audit event if it wrote something (service.trail.recording) and the work that must
commit with it (an Idempotency-Key's mark); commit; close. FastAPI would run each blocking step in
a worker thread of its own (the function, then the commit of a `yield` dependency), each a wait for
a thread and a handover of the GIL; the wrapper is a coroutine that hands the work to the loop's
executor itself, so FastAPI sends it neither to anyio's thread pool nor the answer's serialization
on a second trip.

A route with a write session must take `caller` (its audit event names the actor); both are
checked when the route is made. The caller itself was resolved before the route (service.http.auth).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session
from starlette.responses import Response

from service.errors import RefusalOnRecord, ServiceError
from service.http.auth import authenticated
from service.http.deps import ON_COMMIT, PUBLIC_READ, LeastRole, least_role, session_parameter
from service.http.errors import service_error_response, validation_error_response
from service.http.inputguard import UNREAD, read_json, request_body
from service.http.openapi import camel_case, operation_id
from service.http.requestid import current_request_id
from service.http.responses import rendered_json
from service.http.routeindex import API_PREFIX
from service.trail.recording import record


def api_router(prefix: str, tags: list[str]) -> APIRouter:
    """An area's router: its routes' paths are whole (under API_PREFIX), made by `Route` and named
    by their function (service.http.openapi)."""
    return APIRouter(
        route_class=Route, prefix=API_PREFIX + prefix, tags=tags, generate_unique_id_function=operation_id
    )


class Route(APIRoute):
    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        session = session_parameter(endpoint)
        if session is not None:
            name, writes = session
            if writes and "caller" not in inspect.signature(endpoint).parameters:
                raise TypeError(
                    f"{endpoint.__qualname__} writes: it must take `caller`, its audit event's actor"
                )
            action = camel_case(kwargs.get("name") or endpoint.__name__) if writes else None
            endpoint = _in_unit_of_work(
                endpoint, session=name, audited_as=action, answers=kwargs.get("response_model")
            )
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def with_the_body_the_edge_read(request: Request) -> Response:
            return await handler(EdgeReadRequest(request.scope, request.receive))

        return with_the_body_the_edge_read


class EdgeReadRequest(Request):
    """A request whose JSON body is the value the edge read (service.http.inputguard), not parsed a
    second time. A body the edge left unread (JSON with a syntax error) is parsed here, so that
    FastAPI tells its error with the position; `read_json` makes no number raise there either."""

    async def json(self) -> Any:
        body = request_body(self.scope)
        if body is not None and body.value is not UNREAD:
            return body.value
        return read_json(await self.body())


def _in_unit_of_work(
    endpoint: Callable[..., Any], *, session: str, audited_as: str | None, answers: Any
) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(endpoint):
        raise TypeError(f"{endpoint.__qualname__} uses the database: it must be a plain `def`")

    def run(arguments: dict[str, Any]) -> Any:
        work: Session = arguments[session]
        try:
            result = endpoint(**arguments)
            if audited_as is not None:
                record(
                    work,
                    actor=arguments["caller"],
                    action=audited_as,
                    result=result,
                    arguments=arguments,
                    request_id=current_request_id.get(),
                )
            if (on_commit := work.info.get(ON_COMMIT)) is not None:
                on_commit(work)
            work.commit()
            # An answer already of the route's response model is sent as it is: validating and
            # converting it again would cost more than a small read.
            return rendered_json(result) if type(result) is answers else result
        except RefusalOnRecord as refused:
            work.rollback()
            _record_refusal(work, refused, arguments)
            raise
        except BaseException:
            work.rollback()
            raise
        finally:
            work.close()

    @functools.wraps(endpoint)
    async def in_a_worker_thread(**arguments: Any) -> Any:
        # The loop's executor (sized by `threads`, service.app) straight away: anyio's trip costs
        # a tenth of a one-query read in finding the running loop and taking a limiter's token.
        # The request's context goes along: the audit event reads its request id.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(None, context.run, run, arguments)

    return in_a_worker_thread


def _record_refusal(work: Session, refused: RefusalOnRecord, arguments: dict[str, Any]) -> None:
    """What a refusal keeps on record, and its audit event naming the caller and what was asked,
    in a transaction of their own after the refused work's."""
    target = refused.record_refusal(work)
    record(
        work,
        actor=arguments["caller"],
        action=refused.audit_action,
        result=target,
        arguments=arguments,
        request_id=current_request_id.get(),
    )
    work.commit()


async def authorized_before_validated(request: Request, exc: Exception) -> Response:
    """Invalid input to a route its caller may not use is refused for who is calling, not for what
    was sent: the caller and its role are checked before the input's errors are told (the route's
    own check runs only once its input is valid)."""
    assert isinstance(exc, RequestValidationError)
    route = request.scope.get("route")
    role = least_role(route.dependant) if isinstance(route, APIRoute) else None
    try:
        if role == PUBLIC_READ:
            authenticated(request.scope).optional()
        elif role is not None:
            await LeastRole(role)(request)
    except ServiceError as refused:
        return service_error_response(refused)
    return await validation_error_response(request, exc)
