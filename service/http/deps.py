"""What a route declares in its signature, each once: who may call it (its least role,
`caller: Operator`), the session it works in (`session: ReadSession` or `WriteSession`), the
settings, and the query parameters every list shares.

None of these does any I/O: the caller was resolved by the edge (service.http.auth), and a session
connects when the route first uses it, in the one worker thread that runs the route
(service.http.routing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, get_type_hints

from fastapi import Depends, Query, Request
from fastapi.dependencies.models import Dependant
from sqlalchemy.orm import Session

from api.common import MAX_INT32, MAX_PAGE_SIZE, OrgSlug
from api.members import role_at_least
from service.errors import InsufficientRole
from service.http.auth import Caller, authenticated
from service.settings import Settings
from service.storage.db import Database

# Where a write session keeps the work that must commit in its transaction (an Idempotency-Key's
# mark, put in the request's scope by service.idempotency.middleware).
ON_COMMIT_SCOPE_KEY = "orgdeck.on_commit"
ON_COMMIT = "orgdeck_on_commit"


def _database(request: Request) -> Database:
    return request.app.state.db


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _read_session(request: Request) -> Session:
    """A session for a route that only reads: in autocommit on PostgreSQL, never written through."""
    return _database(request).new_session(write=False)


async def _write_session(request: Request) -> Session:
    """A session for a route that writes: one transaction, which takes SQLite's write lock at its
    start; what else must commit with it comes along."""
    session = _database(request).new_session(write=True)
    if (on_commit := request.scope.get(ON_COMMIT_SCOPE_KEY)) is not None:
        session.info[ON_COMMIT] = on_commit
    return session


# The unit of work of a route, as its signature declares it. The route runs in it, and when the
# route returns, a write session's audit event is appended and it commits (service.http.routing).
ReadSession = Annotated[Session, Depends(_read_session)]
WriteSession = Annotated[Session, Depends(_write_session)]
AppSettings = Annotated[Settings, Depends(_settings)]


class LeastRole:
    """The dependency a route declares its least role with (`caller: Operator`): the caller the edge
    resolved for this request, checked against its member's role of this moment (a lowered role
    applies from the next request on); 401 without a caller, 403 below the role."""

    def __init__(self, role: str) -> None:
        self.role = role

    async def __call__(self, request: Request) -> Caller:
        caller = authenticated(request.scope).required()
        if not role_at_least(caller.role, self.role):
            raise InsufficientRole(needed=self.role, held=caller.role)
        return caller


async def _optional_caller(request: Request) -> Caller | None:
    """The caller when a credential is presented (one that does not work is still 401), else None."""
    return authenticated(request.scope).optional()


def least_role(dependant: Dependant) -> str | None:
    """The role a route declares (through its LeastRole), or None for a route open to anyone."""
    pending = [dependant]
    while pending:
        current = pending.pop()
        if isinstance(current.call, LeastRole):
            return current.call.role
        if current.call is _optional_caller:
            return PUBLIC_READ
        pending.extend(current.dependencies)
    return None


def session_parameter(endpoint: Callable[..., Any]) -> tuple[str, bool] | None:
    """The name of the parameter a route function takes its session as, and whether it writes;
    None for a function without one."""
    for name, hint in get_type_hints(endpoint, include_extras=True).items():
        for declared in getattr(hint, "__metadata__", ()):
            dependency = getattr(declared, "dependency", None)
            if dependency in (_read_session, _write_session):
                return name, dependency is _write_session
    return None


# The roles a route can declare, one per route: `caller: Operator`.
Viewer = Annotated[Caller, Depends(LeastRole("viewer"))]
Author = Annotated[Caller, Depends(LeastRole("author"))]
Operator = Annotated[Caller, Depends(LeastRole("operator"))]
Admin = Annotated[Caller, Depends(LeastRole("admin"))]
# Public registry reads: anyone, or a key of any role (an invalid key is still 401).
PUBLIC_READ = "public"
OptionalCaller = Annotated[Caller | None, Depends(_optional_caller)]

OrgSlugQuery = Annotated[OrgSlug, Query(alias="orgSlug", description="The organization the request acts on.")]
LimitQuery = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Items per page (1..1000).")]
OffsetQuery = Annotated[
    int, Query(ge=0, le=MAX_INT32, description="Items to skip before the page starts (0..2147483647).")
]


def EnumListQuery(values: Iterable[str], description: str) -> Any:  # noqa: N802 (used like Query)
    """A query parameter holding some of `values`, repeated (`status=a&status=b`) or comma-separated
    (`status=a,b`); the route splits and checks them, the schema lists them."""
    return Query(
        description=f"{description}; the parameter repeated, or values comma-separated (`a,b`).",
        json_schema_extra={"items": {"type": "string", "enum": list(values)}},
    )
