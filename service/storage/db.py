"""The database: engine set-up for SQLite and PostgreSQL, the declarative base, sessions."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import (
    JSON,
    ColumnElement,
    DateTime,
    MetaData,
    create_engine,
    event,
    func,
    literal_column,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DisconnectionError, IntegrityError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# A pooled connection idle this long is pinged before a request uses it.
PING_AFTER_IDLE_SECONDS = 10.0
_IDLE_SINCE = "orgdeck_idle_since"

# Execution option that marks a transaction as one that will write (SQLite takes the lock up front).
WRITE_OPTION = "orgdeck_write"
# Marks a reader's session: on PostgreSQL it runs in autocommit, where a write would commit alone.
READER = "orgdeck_reader"


class ReaderWrote(RuntimeError):
    """A reader's session was asked to write: a route that writes declares a write session."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class WireJSON(TypeDecorator[BaseModel]):
    """A wire record kept as its wire JSON (what the API answers of it), read back as the record;
    None is SQL's NULL."""

    impl = JSON(none_as_null=True)
    cache_ok = True

    def __init__(self, model: type[BaseModel]) -> None:
        super().__init__()
        self.model = model

    def process_bind_param(self, value: BaseModel | None, dialect: Any) -> dict[str, Any] | None:
        return None if value is None else value.model_dump(mode="json", by_alias=True)

    def process_result_value(self, value: dict[str, Any] | None, dialect: Any) -> BaseModel | None:
        return None if value is None else self.model.model_validate(value)


def utcnow() -> datetime:
    return datetime.now(UTC)


def dialect_name(session: Session) -> str:
    """`sqlite` or `postgresql`: where a query must be written for each."""
    return session.get_bind().dialect.name


def upsert(session: Session, model: type[Any]) -> Any:
    """The dialect's INSERT of `model`, which has `on_conflict_do_update`, `on_conflict_do_nothing`
    and `excluded`."""
    return dialect_insert(dialect_name(session), model)


def dialect_insert(dialect: str, model: type[Any]) -> Any:
    """`upsert` for a dialect named, for a statement built once per dialect."""
    return (postgresql if dialect == "postgresql" else sqlite).insert(model)


def utc_day(session: Session, column: ColumnElement[datetime]) -> ColumnElement[str]:
    """`YYYY-MM-DD` of a timestamp in UTC, in the database's own dialect.

    The constants are inlined, not bound, so that the GROUP BY repeats the SELECT's expression
    exactly (PostgreSQL compares the two texts, and two bound parameters never match).
    """
    if dialect_name(session) == "postgresql":
        in_utc = func.timezone(literal_column("'UTC'"), column)
        return func.to_char(in_utc, literal_column("'YYYY-MM-DD'"))
    # SQLite keeps UTC timestamps as ISO 8601 text.
    return func.strftime(literal_column("'%Y-%m-%d'"), column)


def insert_unless_taken(session: Session, record: Base) -> bool:
    """Insert `record` in a savepoint; False when a unique constraint refuses it.

    Checking first and inserting after leaves a window in which a concurrent request can take the
    same name; the constraint is the real arbiter, and the savepoint keeps the transaction usable.
    """
    try:
        with session.begin_nested():
            session.add(record)
    except IntegrityError:
        return False
    return True


def make_engine(url: str, *, pool_size: int = 8) -> Engine:
    if url.startswith("sqlite"):
        _create_private_file(make_url(url).database)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=pool_size,
            max_overflow=pool_size,
        )
        _configure_sqlite(engine)
        return engine
    engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size)
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: Engine) -> None:
    """Ping a pooled connection before use only when it sat idle long enough to have been dropped
    (a restart of the database, a proxy's idle timeout): a ping on every checkout is one more round
    trip per request. A connection found dead is replaced before the request sees it; one that dies
    while in use fails its request, and the pool then replaces all of its connections."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.pop(_IDLE_SINCE, None)
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dbapi_connection.execute(";")
            # The driver opened a transaction for the ping: a reader's connection must not be in one.
            dbapi_connection.rollback()
        except Exception as exc:
            raise DisconnectionError(f"a pooled connection no longer answers: {exc}") from exc


def _create_private_file(path: str | None) -> None:
    """Create the database file readable by its owner alone. SQLite would create it (and then its
    -wal and -shm files, which take the database file's mode) readable by everyone."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # We issue BEGIN ourselves (below), so the driver must not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A deferred transaction that later writes cannot wait for the lock and fails with
        # "database is locked"; write transactions take the lock at BEGIN instead.
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        # Straight to the driver: through SQLAlchemy's execution machinery a BEGIN costs as much
        # as a small query.
        connection.connection.driver_connection.execute("BEGIN IMMEDIATE" if writes else "BEGIN")


class Database:
    """One engine and its sessions. Services flush; whoever opened the session commits."""

    def __init__(self, url: str, *, pool_size: int = 8) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self.is_sqlite = url.startswith("sqlite")
        # PostgreSQL reads at READ COMMITTED, where each statement sees its own snapshot inside a
        # transaction as well as outside one: a reader's BEGIN and COMMIT would be two round trips
        # that change nothing, so readers run in autocommit. A reader must therefore never write.
        readers = (
            self.engine if self.is_sqlite else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        self._readers = sessionmaker(readers, expire_on_commit=False, info={READER: True})
        self._writers = sessionmaker(
            self.engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False
        )

    def new_session(self, *, write: bool = False) -> Session:
        """A session that connects on first use; its owner commits and closes it."""
        return (self._writers if write else self._readers)()

    @contextmanager
    def session(self, *, write: bool = False, durable: bool = True) -> Iterator[Session]:
        """A session in one transaction, committed when the block ends without an error.

        `durable=False` lets PostgreSQL's commit return before the transaction is on disk (a crash
        of the database within a fraction of a second may lose it; it never half-applies it): for
        bookkeeping whose loss is harmless, so that it does not wait for the disk as well as the
        work it serves. A durable commit written later writes this one too. SQLite (WAL,
        synchronous=NORMAL) never waits for the disk at commit.
        """
        session = self.new_session(write=write)
        try:
            if not durable and not self.is_sqlite:
                session.execute(text("SET LOCAL synchronous_commit TO OFF"))
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def file_gone(self) -> bool:
        """Whether a SQLite database's file has been removed under the service: its open connections
        still read and write the removed file, and every change made now is lost with them."""
        if not self.is_sqlite:
            return False
        path = make_url(self.url).database
        return bool(path) and path != ":memory:" and not Path(path).exists()

    def ping(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    def dispose(self) -> None:
        self.engine.dispose()


# A reader never writes: refused before the statement runs, rather than committed on its own.
@event.listens_for(Session, "before_flush")
def _reader_flushes(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(READER) and (
        session.new or session.deleted or any(session.is_modified(row) for row in session.dirty)
    ):
        raise ReaderWrote("a reader's session was asked to write")


@event.listens_for(Session, "do_orm_execute")
def _reader_executes(state: Any) -> None:
    if state.session.info.get(READER) and (state.is_insert or state.is_update or state.is_delete):
        raise ReaderWrote("a reader's session was asked to write")
