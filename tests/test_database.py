"""The database layer: what readers and writers hold, and pooled connections that went away."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

import service.storage.db
from service.orgs.models import OrganizationRow
from service.storage.db import Database
from tests.conftest import wait_for


@pytest.fixture
def one_connection(db: Database) -> Iterator[Database]:
    """The session's database through a pool whose sessions, one after another, take the same
    connection."""
    database = Database(db.url, pool_size=1)
    yield database
    database.dispose()


def in_transaction(session: Session) -> bool:
    driver = session.connection().connection.driver_connection
    if isinstance(driver, sqlite3.Connection):
        return driver.in_transaction
    assert isinstance(driver, psycopg.Connection)
    return driver.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


def test_readers_hold_a_transaction_on_sqlite_only_and_writers_on_both(one_connection):
    db = one_connection
    with db.session() as reader:
        reader.scalar(text("SELECT 1"))
        # SQLite: one snapshot for all of a reader's statements. PostgreSQL at READ COMMITTED gives
        # each statement its own snapshot anyway, so a reader sends no BEGIN and no COMMIT.
        assert in_transaction(reader) is db.is_sqlite
    slug = f"rolled-back-{uuid.uuid4().hex[:8]}"
    # The connection the reader had: back in a transaction for a writer, which still rolls back.
    with pytest.raises(RuntimeError), db.session(write=True) as writer:
        writer.add(OrganizationRow(slug=slug, name="Rolled back"))
        writer.flush()
        assert in_transaction(writer)
        raise RuntimeError("the work failed")
    with db.session() as reader:
        assert reader.scalar(select(OrganizationRow).where(OrganizationRow.slug == slug)) is None
        assert in_transaction(reader) is db.is_sqlite


def drop_backends(db: Database, pids: list[int]) -> None:
    """End these server processes, as a restart of the database or a proxy's idle timeout would,
    and wait until they are gone (through `db`'s pool, not the pool under test)."""
    with db.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(pid) FROM unnest(:pids) AS pid"), {"pids": pids})
        alive = text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)")
        wait_for(
            lambda: admin.execute(alive, {"pids": pids}).scalar_one() == 0, what=f"backends {pids} to end"
        )


def test_a_pooled_connection_is_pinged_only_after_sitting_idle(one_connection, db, monkeypatch):
    if db.is_sqlite:
        pytest.skip("a SQLite connection cannot be dropped from the other side")

    def backend() -> int:
        with one_connection.session() as session:
            return session.scalar(text("SELECT pg_backend_pid()"))

    first = backend()
    drop_backends(db, [first])
    # Used a moment ago, it is not pinged: the request that takes it fails, and the pool
    # replaces it (a ping on every checkout would cost every request a round trip).
    with pytest.raises(DBAPIError):
        backend()
    second = backend()
    assert second != first
    monkeypatch.setattr(service.storage.db, "PING_AFTER_IDLE_SECONDS", 0.0)
    # Idle past the ping age and alive: pinged, and handed over outside any transaction, to a
    # reader (which runs in autocommit) as to a writer.
    assert backend() == second
    with one_connection.session() as reader:
        assert reader.scalar(text("SELECT pg_backend_pid()")) == second
        assert not in_transaction(reader)
    with one_connection.session(write=True) as writer:
        assert writer.scalar(text("SELECT pg_backend_pid()")) == second
    drop_backends(db, [second])
    # Idle past the ping age and dropped: found dead before use and replaced; the request never
    # sees it.
    assert backend() not in {first, second}


def idle_connections_of(db: Database) -> list[int]:
    """The server processes behind a pool's idle connections (the service's own, and no other
    test's): all of them checked out at once, asked, and given back."""
    held = [db.engine.connect() for _ in range(max(db.engine.pool.checkedin(), 1))]
    try:
        return [connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() for connection in held]
    finally:
        for connection in held:
            connection.close()


def test_a_connection_dropped_under_a_request_is_a_503_and_the_next_request_is_served(
    server, http, org, db, monkeypatch
):
    if db.is_sqlite:
        pytest.skip("a SQLite connection cannot be dropped from the other side")
    # Connections used a moment ago are not pinged: the request meets the dropped one.
    monkeypatch.setattr(service.storage.db, "PING_AFTER_IDLE_SECONDS", float("inf"))
    answers = []
    with db.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as admin:
        # The key's first use is recorded after its answer, on a connection of its own: done
        # before the drops, so that what meets a dropped connection is a request.
        http.get("api-keys", headers=org.headers, params={"orgSlug": org.slug}).raise_for_status()
        unused = text(
            "SELECT count(*) FROM api_keys JOIN organizations ON organizations.id = api_keys.org_id"
            " WHERE organizations.slug = :slug AND api_keys.last_used_at IS NULL"
        )
        wait_for(lambda: admin.execute(unused, {"slug": org.slug}).scalar_one() == 0, what="the key's use")
        for _ in range(5):
            http.get("api-keys", headers=org.headers, params={"orgSlug": org.slug}).raise_for_status()
            drop_backends(db, idle_connections_of(server.app.state.db))
            answer = http.get("api-keys", headers=org.headers, params={"orgSlug": org.slug})
            answers.append(answer)
            if answer.status_code == 503:
                break
    assert [answer.status_code for answer in answers if answer.status_code != 200] == [503]
    assert answers[-1].json()["code"] == "database_unavailable"
    assert answers[-1].headers["retry-after"] == "1"
    assert http.get("api-keys", headers=org.headers, params={"orgSlug": org.slug}).status_code == 200
