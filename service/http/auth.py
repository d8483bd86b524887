"""Who is calling: the credential a request presents, read once, and the caller it stands for,
resolved once before any route runs.

The edge (service.http.edge) reads the credential from the headers (`presented_credential`:
`X-API-Key` wins over `Authorization: Bearer`) and has `Authentication` resolve it into the
request's state: a `Caller`, or the reason it cannot be one. Everything after reads that state and
nothing reads the headers again: an Idempotency-Key's claim (service.idempotency.middleware), the
least role a route declares (`caller: Operator`, service.http.deps), the route's audit event. A
request without a credential reaches its route with no caller: public reads take it, every other
route answers 401.

What turns a credential into a caller is an `Authenticator`, given by the app
(service.app): an organization's API key is one (service.api_keys.service), a token of the
identity provider or of a trusted workload another (service.signin.service), each tried by the
credential's shape; this package knows no kind of credential itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.types import Scope

from service.errors import Forbidden, Unauthorized
from service.storage.db import Database

logger = logging.getLogger("orgdeck.auth")

MISSING_CREDENTIAL_MESSAGE = (
    "An API key is required: send it as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'"
)
# Where the request's state holds what its credential resolved to.
STATE_KEY = "authenticated"


@dataclass(frozen=True)
class Caller:
    org_id: str
    org_slug: str
    org_name: str
    key_id: str
    key_name: str
    # What the key may do now: its own role, lowered to its member's current one.
    role: str
    key_role: str
    member_id: str | None = None
    member_email: str | None = None
    member_name: str | None = None
    # How the caller proved who it is: "key" (key_id is the key's), "oidc" (a person's token from
    # the identity provider; key_id is their member id) or "workload" (a trusted workload's token;
    # key_id is the workload's id, `claims` what its conditions matched).
    via: str = "key"
    claims: Mapping[str, Any] | None = None
    # A token's (oidc, workload) SHA-256, which its sign-in session is kept under, and its expiry.
    token_hash: str | None = None
    token_expires_at: datetime | None = None

    def org_id_for(self, org_slug: str) -> str:
        """The organization id when `org_slug` is the caller's own, else 403."""
        if org_slug != self.org_slug:
            raise Forbidden(
                f"This {'API key' if self.via == 'key' else 'caller'} belongs to organization '{self.org_slug}' and cannot act on '{org_slug}'",
                field="orgSlug",
            )
        return self.org_id


@dataclass(frozen=True)
class Authenticated:
    """What a request's credential resolved to: its caller, the reason it has none, or neither (no
    credential presented); and what a use of the credential leaves behind (a key's last use), done
    once the answer is sent."""

    caller: Caller | None = None
    refusal: Unauthorized | None = None
    afterwards: Callable[[Session], None] | None = None

    def required(self) -> Caller:
        """The caller, or 401: for every route that is not a public read."""
        if self.caller is not None:
            return self.caller
        raise self.refusal or Unauthorized(MISSING_CREDENTIAL_MESSAGE)

    def optional(self) -> Caller | None:
        """The caller, or None without a credential; a credential that does not work is still 401."""
        if self.refusal is not None:
            raise self.refusal
        return self.caller


ANONYMOUS = Authenticated()


class Authenticator(Protocol):
    """What turns a presented credential into a caller (or the refusal that says why not)."""

    def __call__(self, session: Session, credential: str) -> Authenticated: ...


def presented_credential(headers: Mapping[bytes, bytes]) -> str | None:
    """The credential a request carries (the one place that reads it from the headers), or None;
    Unauthorized for an Authorization header that is not a bearer token."""
    key = headers.get(b"x-api-key", b"").decode("latin-1").strip()
    if key:
        return key
    authorization = headers.get(b"authorization", b"").decode("latin-1").strip()
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("The Authorization header must be 'Bearer <API key>'")
    return token.strip()


class Authentication:
    """Resolves credentials with the app's authenticator, each in one trip to a worker thread."""

    def __init__(self, db: Database, authenticator: Authenticator) -> None:
        self.db = db
        self.authenticator = authenticator

    async def resolve(self, credential: str) -> Authenticated:
        return await asyncio.get_running_loop().run_in_executor(None, self._resolve, credential)

    def _resolve(self, credential: str) -> Authenticated:
        with self.db.session() as session:
            return self.authenticator(session, credential)

    async def after_response(self, authenticated: Authenticated) -> None:
        if authenticated.afterwards is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._afterwards, authenticated)

    def _afterwards(self, authenticated: Authenticated) -> None:
        """In a transaction of its own, after the answer: a failure here (the database went away)
        is logged, not raised into a response already sent."""
        assert authenticated.afterwards is not None and authenticated.caller is not None
        try:
            with self.db.session(write=True) as session:
                authenticated.afterwards(session)
        except SQLAlchemyError as exc:
            logger.warning("Could not record the use of %s: %s", authenticated.caller.key_id, exc)


def authenticated(scope: Scope) -> Authenticated:
    """What the request's credential resolved to (the edge put it in the request's state)."""
    state: dict[str, Any] = scope.get("state") or {}
    return state.get(STATE_KEY, ANONYMOUS)
