"""Backing up and restoring a SQLite database with SQLite's online backup API.

A backup is one step of the API: it copies every page under one read transaction, so the copy is
the database as it was at one moment, while the service goes on writing (WAL lets writers work
beside a reader). Stepping through pages instead would restart on every write of another
connection, and a busy service would never let it finish. It is written beside its destination and
renamed into place once its integrity check passes, so a path either holds a whole backup or none.

PostgreSQL is backed up with its own tools (pg_dump, pg_restore; docs/operations.md).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy.engine import make_url

POSTGRESQL_INSTRUCTIONS = """\
This database is PostgreSQL: back it up and restore it with PostgreSQL's own tools, e.g.
  pg_dump --format=custom --file=orgdeck.dump "$DATABASE_URL"
  createdb orgdeck_restored && pg_restore --no-owner --dbname=postgresql://…/orgdeck_restored orgdeck.dump
(see docs/operations.md, "Backup and restore")."""


class BackupRefused(Exception):
    """A backup or restore that would lose or mix up data: nothing was written."""


def sqlite_path(database_url: str) -> Path | None:
    """The file of a SQLite URL; None for another database."""
    url = make_url(database_url)
    return Path(url.database).resolve() if url.get_backend_name() == "sqlite" and url.database else None


def backup(database: Path, destination: Path) -> None:
    """Copy the live database at `database` to the new file `destination`, consistent at one moment."""
    if not database.exists():
        raise BackupRefused(f"No database at {database}")
    if destination.exists():
        raise BackupRefused(f"{destination} exists; a backup never overwrites a file")
    _copy(database, destination)


def restore(backup_file: Path, database: Path, *, force: bool) -> None:
    """Copy the backup at `backup_file` to `database`; an existing database only with `force` (its
    service stopped first: a restore under a serving process would change its data beneath it)."""
    _check(backup_file)
    if database.exists() and not force:
        raise BackupRefused(
            f"A database exists at {database}; restore into a new data directory, or pass --force"
        )
    database.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(backup_file)) as source, closing(sqlite3.connect(database)) as target:
        source.backup(target)


def _copy(source_path: Path, destination: Path) -> None:
    partial = destination.with_name(destination.name + ".partial")
    partial.unlink(missing_ok=True)
    with (
        closing(sqlite3.connect(source_path, timeout=30)) as source,
        closing(sqlite3.connect(partial)) as copy,
    ):
        source.backup(copy)
    try:
        _check(partial)
    except BackupRefused:
        partial.unlink()
        raise
    partial.rename(destination)


def _check(path: Path) -> None:
    """The file is a whole Orgdeck database: SQLite's integrity check passes and it has a schema version."""
    if not path.is_file():
        raise BackupRefused(f"No backup at {path}")
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            [verdict] = connection.execute("PRAGMA integrity_check").fetchone()
            has_version = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise BackupRefused(f"{path} is not a SQLite database: {exc}") from exc
    if verdict != "ok" or not has_version:
        raise BackupRefused(f"{path} is not a whole Orgdeck database ({verdict})")
