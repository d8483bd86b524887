"""Apply Alembic migrations programmatically (used by `serve`, `migrate`, the console and tests), and
say where a database stands against the code's migrations (`migrate --check`, readiness)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from service.storage.db import Database

MIGRATIONS = Path(__file__).parent.parent / "migrations"


class Standing(enum.Enum):
    AT_HEAD = "at head"
    BEHIND = "behind"
    # A revision this code does not know: the database was migrated by a newer release.
    NEWER = "newer than the code"


@dataclass(frozen=True)
class SchemaState:
    database: frozenset[str]

    @property
    def standing(self) -> Standing:
        if not self.database <= _known_revisions():
            return Standing.NEWER
        # An area's revisions depend on other areas' (depends_on): a database is at head when what
        # its revisions build on covers every revision of the code.
        applied = {
            revision.revision for revision in _script().iterate_revisions(tuple(self.database), "base")
        }
        return Standing.AT_HEAD if applied == _known_revisions() else Standing.BEHIND

    def describe(self) -> str:
        shown = ", ".join(sorted(self.database)) or "none (an empty database)"
        return f"database at {shown}; this code's newest: {newest_revision()}"


class SchemaNewerThanCode(Exception):
    """The database carries a revision this code does not know: a newer release migrated it."""


def alembic_config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = db.engine
    return config


def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision of every area; refuse a database newer than the code,
    which an older release must not serve (its tables may no longer be what this code reads)."""
    state = schema_state(db)
    if state.standing is Standing.NEWER:
        raise SchemaNewerThanCode(
            f"The database was migrated by a newer release of Orgdeck ({state.describe()}); "
            "run that release, or restore a backup taken before the upgrade."
        )
    command.upgrade(alembic_config(db), "heads")


def schema_state(db: Database) -> SchemaState:
    with db.engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    return SchemaState(database=frozenset(current))


@cache
def _script() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config)


def newest_revision() -> str:
    return max(_known_revisions())  # revisions are numbered: 0028_…


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(revision.revision for revision in _script().walk_revisions())
