"""Dependency aliases used by every router: the request's session, settings and caller."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import BackgroundTasks, Depends, Query, Request
from fastapi.dependencies.models import Dependant
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from api.common import MAX_INT32, MAX_PAGE_SIZE, OrgSlug
from api.members import role_at_least
from service.api_keys.service import ResolvedKey, needs_last_used_update, resolve_key, touch_key
from service.auth import MISSING_KEY_MESSAGE, Caller, presented_key
from service.db import Database
from service.errors import InsufficientRole, Unauthorized, logger
from service.idempotency.middleware import CALLER_SCOPE_KEY, CLAIM_SCOPE_KEY
from service.settings import Settings

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Where a request's Idempotency-Key claim waits in its session for the commit (service.routing).
CLAIM_INFO_KEY = "orgdeck.idempotency_claim"


def _database(request: Request) -> Database:
    return request.app.state.db


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _session(request: Request) -> Session:
    """The request's session, not yet connected: the route uses, commits and closes it in the one
    worker thread that runs it (service.routing). A request refused before its route runs never
    connects it, so there is nothing to close."""
    session = _database(request).new_session(write=request.method not in READ_METHODS)
    if (claim := request.scope.get(CLAIM_SCOPE_KEY)) is not None:
        session.info[CLAIM_INFO_KEY] = claim
    return session


DbSession = Annotated[Session, Depends(_session)]
AppSettings = Annotated[Settings, Depends(_settings)]


@dataclass(frozen=True)
class PendingCaller:
    """The key a request presents and the role its route needs, resolved where the route runs."""

    db: Database
    background: BackgroundTasks | None
    key: str
    role: str | None
    # The key as this request's Idempotency-Key claim resolved it, if it did.
    resolved: ResolvedKey | None = None

    def resolve(self, session: Session) -> Caller:
        """The caller, or 401 for a key that does not work, 403 for a role below the route's."""
        record = self.resolved or resolve_key(session, self.key)
        if self.background is not None and needs_last_used_update(record):
            # After the response, in a transaction of its own: never holds up the request's.
            self.background.add_task(_touch, self.db, record.id)
        caller = Caller(
            org_id=record.org_id,
            org_slug=record.org_slug,
            org_name=record.org_name,
            key_id=record.id,
            key_name=record.name,
            role=record.effective_role,
            key_role=record.role,
            member_id=record.member_id,
            member_email=record.member_email,
            member_name=record.member_name,
        )
        if self.role is not None and not role_at_least(caller.role, self.role):
            raise InsufficientRole(needed=self.role, held=caller.role)
        return caller


class RoleCheck:
    """The dependency a route declares its least role with (`caller: Operator`). It only reads the
    presented key; the route resolves it against its member's current role on every request
    (service.routing), so a change of role applies at once."""

    def __init__(self, role: str) -> None:
        self.role = role

    async def __call__(self, request: Request, background: BackgroundTasks) -> PendingCaller:
        key = presented_key(request.headers)
        if key is None:
            raise Unauthorized(MISSING_KEY_MESSAGE)
        return PendingCaller(
            _database(request), background, key, self.role, request.scope.get(CALLER_SCOPE_KEY)
        )


async def _optional_caller(request: Request, background: BackgroundTasks) -> PendingCaller | None:
    """The caller when a key is presented (an invalid one is still 401), else None: for public reads."""
    key = presented_key(request.headers)
    return None if key is None else PendingCaller(_database(request), background, key, None)


def _touch(db: Database, key_id: str) -> None:
    """Record a key's use, after its request was answered: a failure here (the database went away)
    is logged, not raised into a response already sent."""
    try:
        with db.session(write=True) as writer:
            touch_key(writer, key_id=key_id)
    except SQLAlchemyError as exc:
        logger.warning("Could not record the use of key %s: %s", key_id, exc)


def least_role(dependant: Dependant) -> str | None:
    """The role a route declares (through its RoleCheck), or None for a route open to anyone."""
    pending = [dependant]
    while pending:
        current = pending.pop()
        if isinstance(current.call, RoleCheck):
            return current.call.role
        if current.call is _optional_caller:
            return PUBLIC_READ
        pending.extend(current.dependencies)
    return None


# The roles a route can declare, one per route: `caller: Operator`.
Viewer = Annotated[Caller, Depends(RoleCheck("viewer"))]
Author = Annotated[Caller, Depends(RoleCheck("author"))]
Operator = Annotated[Caller, Depends(RoleCheck("operator"))]
Admin = Annotated[Caller, Depends(RoleCheck("admin"))]
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
