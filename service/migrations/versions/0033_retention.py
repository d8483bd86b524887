"""audit exports; an audit event may be deleted only once a completed export has covered it

Retention prunes the trail by age, and that is the one deletion the database allows: the DELETE
guard of 0018 now lets a row go when an export of its organization covers its id, and refuses every
other deletion as before (UPDATE and TRUNCATE stay refused).

Revision ID: 0033_retention
Revises: 0031_trace_context
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0033_retention"
down_revision = "0031_trace_context"
branch_labels = None
depends_on = None

COVERED = """
    EXISTS (
        SELECT 1 FROM audit_exports
        WHERE audit_exports.org_id = OLD.org_id
          AND audit_exports.covers_from_id <= OLD.id AND OLD.id < audit_exports.covers_to_id
          AND audit_exports.completed_at IS NOT NULL
    )
"""
SQLITE_DELETE_GUARD = """
    CREATE TRIGGER audit_events_append_only_DELETE BEFORE DELETE ON audit_events
    BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END
"""
SQLITE_EXPORTED_DELETE_GUARD = f"""
    CREATE TRIGGER audit_events_append_only_DELETE BEFORE DELETE ON audit_events
    WHEN NOT {COVERED}
    BEGIN SELECT RAISE(ABORT, 'audit events are append-only; only exported events may be pruned'); END
"""
POSTGRESQL_UPGRADE = [
    "DROP TRIGGER audit_events_append_only ON audit_events",
    """
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()
    """,
    f"""
    CREATE FUNCTION audit_events_delete_exported() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT {COVERED} THEN
            RAISE EXCEPTION 'audit events are append-only; only exported events may be pruned';
        END IF;
        RETURN OLD;
    END $$
    """,
    """
    CREATE TRIGGER audit_events_delete_exported BEFORE DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_delete_exported()
    """,
]
POSTGRESQL_DOWNGRADE = [
    "DROP TRIGGER audit_events_delete_exported ON audit_events",
    "DROP FUNCTION audit_events_delete_exported()",
    "DROP TRIGGER audit_events_append_only ON audit_events",
    """
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()
    """,
]


def upgrade() -> None:
    op.create_table(
        "audit_exports",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("covers_from_id", sa.String(length=40), nullable=False),
        sa.Column("covers_to_id", sa.String(length=40), nullable=False),
        sa.Column("range_start", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("range_end", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor_key_id", sa.String(length=40), nullable=True),
        sa.Column("actor_member_email", sa.String(length=320), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_audit_exports_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_exports")),
    )
    op.create_index("ix_audit_exports_org_id_covers_from_id", "audit_exports", ["org_id", "covers_from_id"])
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRESQL_UPGRADE:
            op.execute(statement)
    else:
        op.execute("DROP TRIGGER audit_events_append_only_DELETE")
        op.execute(SQLITE_EXPORTED_DELETE_GUARD)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in POSTGRESQL_DOWNGRADE:
            op.execute(statement)
    else:
        op.execute("DROP TRIGGER audit_events_append_only_DELETE")
        op.execute(SQLITE_DELETE_GUARD)
    op.drop_index("ix_audit_exports_org_id_covers_from_id", table_name="audit_exports")
    op.drop_table("audit_exports")
