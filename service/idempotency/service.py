"""Idempotency keys: claiming a key for a request, storing its answer, replaying it, expiring keys.

A key belongs to its caller: organization, caller and key name it together, so one caller's answer
is never replayed to another (whose request with the same key runs as its own).

A key is claimed in a transaction of its own before the request runs, so a concurrent duplicate
finds it taken (409). The request's own transaction marks the key `committed` together with its
work, so a request whose process died before committing leaves the key free for a retry once its
lease ends, and one that did commit is never run again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, delete, select, tuple_, update
from sqlalchemy.orm import Session

from service.errors import ServiceError
from service.http.inputguard import UNREAD, Body
from service.idempotency.models import IdempotencyKeyRow
from service.observability import metrics
from service.settings import Settings
from service.storage.crypto import REENCRYPT_BATCH, Cipher, DecryptionFailed
from service.storage.db import Database, dialect_insert, dialect_name, utcnow

logger = logging.getLogger("orgdeck.retention")

HEADER = "Idempotency-Key"
KEY_LIFETIME = timedelta(hours=24)
# How long a request may hold its key before a retry presumes its process died. Longer than any
# request takes (a model call is bounded at 30 s); a request still running past it cannot commit.
LEASE = timedelta(minutes=2)


class IdempotencyKeyReused(ServiceError):
    code = "idempotency_key_reused"


class IdempotencyKeyInUse(ServiceError):
    status = 409
    code = "idempotency_key_in_use"


class IdempotentAnswerLost(ServiceError):
    status = 409
    code = "idempotency_answer_lost"


@dataclass(frozen=True)
class Claim:
    """A request's hold on a key: only the holder of `token` may commit work under it."""

    org_id: str
    caller_id: str
    key: str
    token: str


@dataclass(frozen=True)
class StoredAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def fingerprint(method: str, path: str, query: str, body: Body | None) -> str:
    """What makes two requests the same one: method, path, query and body (JSON compared as data,
    so key order and spacing do not matter)."""
    raw = b"" if body is None else body.raw
    canonical = (
        raw
        if body is None or body.value is UNREAD  # not JSON, or not valid JSON: as it is
        else json.dumps(body.value, sort_keys=True, separators=(",", ":")).encode()
    )
    digest = hashlib.sha256(f"{method} {path}?{query}\n".encode())
    digest.update(canonical)
    return digest.hexdigest()


def claim_key(
    session: Session,
    *,
    cipher: Cipher,
    org_id: str,
    caller_id: str,
    key: str,
    fingerprint: str,
    method: str,
    path: str,
) -> Claim | StoredAnswer:
    """Hold the caller's `key` for a new request, or return the answer it already has; 400/409 when
    it cannot be used."""
    now = utcnow()
    # A new key, the common case, is claimed by one statement; a key already there (or inserted by
    # a concurrent request, whose commit the INSERT waits for) is read and decided on below.
    hold = _holding(fingerprint=fingerprint, method=method, path=path)
    values = {"org_id": org_id, "caller_id": caller_id, "key": key, "created_at": now, **hold}
    while True:
        inserted = session.connection().execute(_claim_statement(dialect_name(session)), values).scalar()
        if inserted is not None:
            return Claim(org_id, caller_id, key, inserted)
        row = session.get(IdempotencyKeyRow, (org_id, caller_id, key), with_for_update=True)
        if row is not None:
            break
        # Expired and deleted by the worker between the two statements: a new key again.
    if row.created_at <= now - KEY_LIFETIME:
        row.created_at = now
        _hold(row, fingerprint=fingerprint, method=method, path=path)
        return Claim(org_id, caller_id, key, row.claim)
    if row.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"This {HEADER} was already used for another request ({row.method} {row.path} with "
            "another body); send a new key with a new request",
            field=HEADER,
        )
    if row.state == "done":
        return _stored_answer(row, cipher)
    if row.locked_until > now:
        raise IdempotencyKeyInUse(
            f"A request with this {HEADER} is still being processed; retry once it has ended", field=HEADER
        )
    if row.state == "committed":
        raise IdempotentAnswerLost(
            f"The request sent with this {HEADER} was carried out, but the service stopped before "
            "recording its answer; look its result up instead of sending it again",
            field=HEADER,
        )
    # Its request died before committing anything: this one takes its place.
    _hold(row, fingerprint=fingerprint, method=method, path=path)
    return Claim(org_id, caller_id, key, row.claim)


def _stored_answer(row: IdempotencyKeyRow, cipher: Cipher) -> StoredAnswer:
    assert row.status_code is not None and row.response_body_encrypted is not None
    try:
        body = cipher.decrypt(row.response_body_encrypted).encode("latin-1")
    except DecryptionFailed as exc:
        raise IdempotentAnswerLost(
            f"The request sent with this {HEADER} was carried out, but its answer was encrypted with a "
            "key no longer configured; look its result up instead of sending it again",
            field=HEADER,
        ) from exc
    headers = [(name, value) for name, value in row.response_headers or []]
    return StoredAnswer(row.status_code, headers, body)


def _holding(*, fingerprint: str, method: str, path: str) -> dict[str, Any]:
    """The columns of a key held by a new request (no answer yet)."""
    return {
        "fingerprint": fingerprint,
        "method": method,
        "path": path,
        "state": "running",
        "claim": secrets.token_hex(16),
        "locked_until": utcnow() + LEASE,
    }


def _hold(row: IdempotencyKeyRow, *, fingerprint: str, method: str, path: str) -> None:
    for name, value in _holding(fingerprint=fingerprint, method=method, path=path).items():
        setattr(row, name, value)
    row.status_code = row.response_headers = row.response_body_encrypted = None


def mark_committed(session: Session, claim: Claim) -> None:
    """In the request's own transaction: its work and the key's `committed` state commit together."""
    marked = session.connection().execute(_MARK_COMMITTED, _holder(claim))
    if marked.rowcount != 1:
        raise IdempotencyKeyInUse(
            f"This request held its {HEADER} too long and a retry took it over; nothing was changed",
            field=HEADER,
        )


def finish(session: Session, claim: Claim, answer: StoredAnswer, cipher: Cipher) -> None:
    """Store the request's answer for replay; a 5xx whose work did not commit frees the key instead.
    Either only while the request still holds the key."""
    if answer.status >= 500 and release(session, claim):
        return
    stored = {
        "answer_status": answer.status,
        "answer_headers": [list(pair) for pair in answer.headers],
        # Latin-1 maps each byte to one character and back: any body survives the text cipher.
        "answer_body": cipher.encrypt(answer.body.decode("latin-1")),
    }
    session.connection().execute(_STORE_ANSWER, _holder(claim) | stored)


def release(session: Session, claim: Claim) -> bool:
    """Free a key whose request's work did not commit; whether it did (a request that committed
    keeps its key)."""
    return session.connection().execute(_RELEASE, _holder(claim)).rowcount == 1


# The statements of every keyed request, built once: building one costs as much as running it.
@functools.cache
def _claim_statement(dialect: str) -> Any:
    """INSERT of a new key that does nothing when the key is there, returning the new claim."""
    return (
        dialect_insert(dialect, IdempotencyKeyRow)
        .on_conflict_do_nothing(index_elements=["org_id", "caller_id", "key"])
        .returning(IdempotencyKeyRow.claim)
    )


# The key, while a claim holds it.
_HELD = (
    IdempotencyKeyRow.org_id == bindparam("held_org_id"),
    IdempotencyKeyRow.caller_id == bindparam("held_caller_id"),
    IdempotencyKeyRow.key == bindparam("held_key"),
    IdempotencyKeyRow.claim == bindparam("held_token"),
)
_RUNNING = IdempotencyKeyRow.state == "running"
_MARK_COMMITTED = update(IdempotencyKeyRow).where(*_HELD, _RUNNING).values(state="committed")
_RELEASE = delete(IdempotencyKeyRow).where(*_HELD, _RUNNING)
_STORE_ANSWER = (
    update(IdempotencyKeyRow)
    .where(*_HELD)
    .values(
        state="done",
        status_code=bindparam("answer_status"),
        response_headers=bindparam("answer_headers", type_=IdempotencyKeyRow.response_headers.type),
        response_body_encrypted=bindparam("answer_body"),
    )
)


def _holder(claim: Claim) -> dict[str, str]:
    return {
        "held_org_id": claim.org_id,
        "held_caller_id": claim.caller_id,
        "held_key": claim.key,
        "held_token": claim.token,
    }


def rotate_answers(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every stored answer under the cipher's first key (`rotate-secrets`); return how many.

    Like `reencrypt_column`, for a table keyed by (organization, caller, key): each row is rewritten
    only if it still holds the ciphertext read.
    """
    primary_key = (IdempotencyKeyRow.org_id, IdempotencyKeyRow.caller_id, IdempotencyKeyRow.key)
    rewritten = 0
    last: tuple[str, ...] = ("", "", "")
    while True:
        batch = session.execute(
            select(*primary_key, IdempotencyKeyRow.response_body_encrypted)
            .where(tuple_(*primary_key) > last, IdempotencyKeyRow.response_body_encrypted.is_not(None))
            .order_by(*primary_key)
            .limit(REENCRYPT_BATCH)
        ).all()
        if not batch:
            return rewritten
        for *row_key, token in batch:
            result = session.execute(
                update(IdempotencyKeyRow)
                .where(
                    *(column == value for column, value in zip(primary_key, row_key, strict=True)),
                    IdempotencyKeyRow.response_body_encrypted == token,
                )
                .values(response_body_encrypted=cipher.rotate(token))
                .execution_options(synchronize_session=False)
            )
            rewritten += result.rowcount  # type: ignore[attr-defined]
        last = tuple(batch[-1][:3])


def expire_keys(db: Database, settings: Settings) -> bool:
    """Worker task: delete keys older than their retention (ORGDECK_RETENTION_IDEMPOTENCY_DAYS, at
    least their replay lifetime: older ones would be treated as new anyway), a bounded batch per
    transaction; True while more are left."""
    expired = IdempotencyKeyRow.created_at <= utcnow() - timedelta(days=settings.retention_idempotency_days)
    row_key = tuple_(IdempotencyKeyRow.org_id, IdempotencyKeyRow.caller_id, IdempotencyKeyRow.key)
    oldest = (
        select(IdempotencyKeyRow.org_id, IdempotencyKeyRow.caller_id, IdempotencyKeyRow.key)
        .where(expired)
        .limit(settings.retention_batch_size)
    )
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        keys = session.execute(oldest).all()
    if not keys:
        return False
    with db.session(write=True) as session:
        session.execute(delete(IdempotencyKeyRow).where(row_key.in_([tuple(key) for key in keys]), expired))
    metrics.RETENTION_PRUNED.labels(kind="idempotency_records").inc(len(keys))
    logger.info("Retention pruned %d idempotency_records", len(keys))
    return len(keys) == settings.retention_batch_size
    with db.session(write=True) as session:
        session.execute(delete(IdempotencyKeyRow).where(expired))
    return False
