"""Apply Alembic migrations programmatically (used by `serve`, `migrate`, the console and tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from service.storage.db import Database

MIGRATIONS = Path(__file__).parent.parent / "migrations"


def alembic_config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = db.engine
    return config


def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision of every area."""
    command.upgrade(alembic_config(db), "heads")
