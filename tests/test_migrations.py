"""The migrations build exactly the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, MetaData, text
from sqlalchemy.exc import DBAPIError

from service.models import Base
from service.storage.db import Database
from service.storage.migrate import alembic_config
from tests.conftest import scratch_database


def test_migrated_schema_matches_the_models(db):
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_delivery_records_upgrade_fills_existing_rows_and_downgrades(tmp_path):
    """0015 on a database holding deliveries of the earlier schema: each gets its event type, a
    tried pending one becomes `failed` with its last attempt; down and up again leaves the schema
    the models describe."""
    with scratch_database(tmp_path) as url:
        db = Database(url)
        config = alembic_config(db)
        try:
            command.upgrade(config, "heads")
            command.downgrade(config, "0014_deployment_month_rollups")
            with db.engine.begin() as connection:
                _earlier_deliveries(connection)
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                rows = connection.execute(
                    text(
                        "SELECT id, event_type, status, last_response_status, last_error "
                        "FROM notification_deliveries ORDER BY id"
                    )
                ).all()
            assert [tuple(row) for row in rows] == [
                ("msg_1", "deployment.error", "failed", 500, "HTTP 500"),
                ("msg_2", "agent.stale", "pending", None, None),
            ]
            command.downgrade(config, "0014_deployment_month_rollups")
            with db.engine.connect() as connection:
                statuses = connection.execute(text("SELECT status FROM notification_deliveries")).scalars()
                assert sorted(statuses) == ["pending", "pending"]
                # The log's counting triggers survive the way down.
                connection.execute(text("DELETE FROM notification_logs"))
                counted = connection.execute(text("SELECT SUM(attempts) FROM notification_log_counts"))
                assert counted.scalar_one() == 0
                connection.rollback()
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                context = MigrationContext.configure(connection, opts={"compare_type": True})
                assert compare_metadata(context, Base.metadata) == []
        finally:
            db.dispose()


def _earlier_deliveries(connection: Connection) -> None:
    """An organization, a channel, two events and their deliveries, one tried once, in 0014's schema."""
    now = datetime(2026, 1, 5, 12, tzinfo=UTC)
    rows = {
        "organizations": [{"id": "org_1", "slug": "acme", "name": "Acme", "created_at": now}],
        "notification_channels": [
            {
                "id": "ch_1",
                "org_id": "org_1",
                "name": "Hook",
                "kind": "webhook",
                "config": {},
                "created_at": now,
            }
        ],
        "events": [
            {"id": "evt_1", "org_id": "org_1", "type": "deployment.error", "payload": {}, "occurred_at": now},
            {"id": "evt_2", "org_id": "org_1", "type": "agent.stale", "payload": {}, "occurred_at": now},
        ],
        "notification_deliveries": [
            {"id": "msg_1", "event_id": "evt_1", "attempts": 1},
            {"id": "msg_2", "event_id": "evt_2", "attempts": 0},
        ],
        "notification_logs": [
            {
                "id": "log_1",
                "org_id": "org_1",
                "delivery_id": "msg_1",
                "event_id": "evt_1",
                "event_type": "deployment.error",
                "channel_id": "ch_1",
                "channel_name": "Hook",
                "channel_kind": "webhook",
                "attempt": 1,
                "status": "failed",
                "response_status": 500,
                "error": "HTTP 500",
                "created_at": now,
            }
        ],
    }
    for delivery in rows["notification_deliveries"]:
        delivery |= {"org_id": "org_1", "channel_id": "ch_1", "status": "pending", "created_at": now}
        delivery["next_attempt_at"] = now
    metadata = MetaData()
    metadata.reflect(connection, only=list(rows))
    for table, values in rows.items():
        connection.execute(metadata.tables[table].insert(), values)


def test_change_requests_downgrade_keeps_every_organizations_rows(tmp_path):
    """0019 adds its columns to organizations, environments and registries in place: down and up
    again never copies and drops those tables (dropping `organizations` would cascade to all)."""
    with scratch_database(tmp_path) as url:
        db = Database(url)
        config = alembic_config(db)
        try:
            command.upgrade(config, "heads")
            now = datetime(2026, 1, 5, 12, tzinfo=UTC)
            with db.engine.begin() as connection:
                metadata = MetaData()
                metadata.reflect(connection, only=["organizations", "environments"])
                connection.execute(
                    metadata.tables["organizations"].insert(),
                    {
                        "id": "org_1",
                        "slug": "acme",
                        "name": "Acme",
                        "created_at": now,
                        "change_request_ttl_days": 3,
                    },
                )
                connection.execute(
                    metadata.tables["environments"].insert(),
                    {
                        "id": "env_1",
                        "org_id": "org_1",
                        "name": "production",
                        "description": "",
                        "target": "builtin",
                        "protected": True,
                        "required_approvals": 2,
                        "created_at": now,
                        "updated_at": now,
                    },
                )
            command.downgrade(config, "0018_members_audit")
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                environment = connection.execute(
                    text("SELECT name, protected, required_approvals FROM environments")
                ).one()
                org = connection.execute(
                    text("SELECT slug, change_request_ttl_days FROM organizations")
                ).one()
                context = MigrationContext.configure(connection, opts={"compare_type": True})
                assert compare_metadata(context, Base.metadata) == []
            # The rows survive; the columns come back with their defaults.
            assert tuple(environment) == ("production", False, 1)
            assert tuple(org) == ("acme", 7)
        finally:
            db.dispose()


def test_idempotency_callers_drop_the_keys_stored_without_one_and_downgrade(tmp_path):
    """0027 puts the caller in each key's primary key: keys stored without one (they live a day) are
    dropped, as they are on the way down; down and up again leaves the schema the models describe."""
    with scratch_database(tmp_path) as url:
        db = Database(url)
        config = alembic_config(db)
        try:
            command.upgrade(config, "heads")
            command.downgrade(config, "0024_notification_log_day_counts")
            now = datetime(2026, 1, 5, 12, tzinfo=UTC)
            with db.engine.begin() as connection:
                metadata = MetaData()
                metadata.reflect(connection, only=["organizations", "idempotency_keys"])
                connection.execute(
                    metadata.tables["organizations"].insert(),
                    {"id": "org_1", "slug": "acme", "name": "Acme", "created_at": now},
                )
                connection.execute(
                    metadata.tables["idempotency_keys"].insert(),
                    {
                        "org_id": "org_1",
                        "key": "k1",
                        "fingerprint": "f" * 64,
                        "method": "POST",
                        "path": "/api/api-keys",
                        "state": "done",
                        "claim": "c" * 32,
                        "locked_until": now,
                        "created_at": now,
                    },
                )
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                assert connection.execute(text("SELECT COUNT(*) FROM idempotency_keys")).scalar_one() == 0
            command.downgrade(config, "0024_notification_log_day_counts")
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                context = MigrationContext.configure(connection, opts={"compare_type": True})
                assert compare_metadata(context, Base.metadata) == []
        finally:
            db.dispose()


def test_changes_on_record_upgrade_governs_deployment_requests_by_their_environment(tmp_path):
    """0026 on a database holding change requests: a deployment request is governed by its payload's
    environment from then on, others by none; an event recorded before names no change request;
    down and up again adds its columns in place, so the audit trail stays append-only, and leaves
    the schema the models describe."""
    with scratch_database(tmp_path) as url:
        db = Database(url)
        config = alembic_config(db)
        try:
            command.upgrade(config, "heads")
            command.downgrade(config, "0024_notification_log_day_counts")
            with db.engine.begin() as connection:
                _earlier_change_requests(connection)
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                governed = connection.execute(
                    text("SELECT id, environment_id FROM change_requests ORDER BY id")
                )
                assert [tuple(row) for row in governed] == [("chg_1", "env_1"), ("chg_2", None)]
                made_directly = connection.execute(
                    text("SELECT id FROM audit_events WHERE change_request IS NULL")
                )
                assert list(made_directly.scalars()) == ["aud_1"]
            command.downgrade(config, "0024_notification_log_day_counts")
            command.upgrade(config, "heads")
            with db.engine.connect() as connection:
                context = MigrationContext.configure(connection, opts={"compare_type": True})
                assert compare_metadata(context, Base.metadata) == []
                with pytest.raises(DBAPIError, match="append-only"):
                    connection.execute(text("DELETE FROM audit_events"))
        finally:
            db.dispose()


def _earlier_change_requests(connection: Connection) -> None:
    """An organization, an environment, an audit event and two change requests, in 0024's schema."""
    now = datetime(2026, 1, 5, 12, tzinfo=UTC)
    request = {
        "org_id": "org_1",
        "status": "open",
        "reason": "Release",
        "preview": {},
        "required_approvals": 1,
        "requested_by_key_id": "key_1",
        "requested_by_key_name": "ci",
        "created_at": now,
    }
    rows = {
        "organizations": [{"id": "org_1", "slug": "acme", "name": "Acme", "created_at": now}],
        "environments": [
            {
                "id": "env_1",
                "org_id": "org_1",
                "name": "production",
                "description": "",
                "target": "builtin",
                "created_at": now,
                "updated_at": now,
            }
        ],
        "audit_events": [
            {"id": "aud_1", "org_id": "org_1", "occurred_at": now, "action": "x", "changes": {}}
        ],
        "change_requests": [
            request
            | {
                "id": "chg_1",
                "kind": "deployment",
                "target": "environment production",
                "payload": {"environmentId": "env_1", "agentStableKeys": ["triage"]},
            },
            request
            | {
                "id": "chg_2",
                "kind": "label",
                "target": "label production of acme/prompts/greeting",
                "payload": {"registryRef": "acme/prompts", "name": "greeting"},
            },
        ],
    }
    metadata = MetaData()
    metadata.reflect(connection, only=list(rows))
    for table, values in rows.items():
        connection.execute(metadata.tables[table].insert(), values)
