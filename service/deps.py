"""Dependency aliases used by every router: the request's session, settings and caller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import BackgroundTasks, Depends, Query, Request
from sqlalchemy.orm import Session

from api.common import OrgSlug
from service.api_keys.service import needs_last_used_update, resolve_key, touch_key
from service.auth import MISSING_KEY_MESSAGE, Caller, presented_key
from service.db import Database
from service.errors import Unauthorized
from service.settings import Settings

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _database(request: Request) -> Database:
    return request.app.state.db


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _session(request: Request) -> Iterator[Session]:
    # scope="function" below: the commit finishes before the response is sent, so a failed
    # commit is an error answer, never a 200.
    with _database(request).session(write=request.method not in READ_METHODS) as session:
        yield session


DbSession = Annotated[Session, Depends(_session, scope="function")]
AppSettings = Annotated[Settings, Depends(_settings)]


def _caller(request: Request, session: DbSession, background: BackgroundTasks) -> Caller:
    key = presented_key(request.headers)
    if key is None:
        raise Unauthorized(MISSING_KEY_MESSAGE)
    record = resolve_key(session, key)
    if needs_last_used_update(record):
        # After the response, in a transaction of its own: never holds up or deadlocks the request's.
        background.add_task(_touch, _database(request), record.id)
    return Caller(
        org_id=record.org_id,
        org_slug=record.org.slug,
        org_name=record.org.name,
        key_id=record.id,
        key_name=record.name,
    )


def _touch(db: Database, key_id: str) -> None:
    with db.session(write=True) as writer:
        touch_key(writer, key_id=key_id)


CurrentCaller = Annotated[Caller, Depends(_caller)]

OrgSlugQuery = Annotated[OrgSlug, Query(alias="orgSlug", description="The organization the request acts on.")]
