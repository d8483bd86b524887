"""members with roles, keys with a role and an owner, and the append-only audit trail

Keys made before members existed keep their power: they become admin service keys.

Revision ID: 0018_members_audit
Revises: 0017_idempotency_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0018_members_audit"
down_revision = "0017_idempotency_keys"
branch_labels = None
depends_on = None

# The database itself refuses to change or remove an audit event, whoever connects.
SQLITE_GUARDS = [
    f"""
    CREATE TRIGGER audit_events_append_only_{verb} BEFORE {verb} ON audit_events
    BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END
    """
    for verb in ("UPDATE", "DELETE")
]
POSTGRESQL_GUARDS = [
    """
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'audit events are append-only'; END $$
    """,
    """
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()
    """,
]


def upgrade() -> None:
    op.create_table(
        "members",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("deactivated_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_members_org_id_organizations"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_members")),
        sa.UniqueConstraint("org_id", "email", name="uq_members_org_id_email"),
    )
    with op.batch_alter_table("api_keys") as batch_op:
        batch_op.add_column(sa.Column("role", sa.String(length=20), nullable=False, server_default="admin"))
        batch_op.add_column(sa.Column("member_id", sa.String(length=40), nullable=True))
        batch_op.create_foreign_key(op.f("fk_api_keys_member_id_members"), "members", ["member_id"], ["id"])
        batch_op.create_index(batch_op.f("ix_api_keys_member_id"), ["member_id"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("occurred_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor_key_id", sa.String(length=40), nullable=True),
        sa.Column("actor_key_name", sa.String(length=200), nullable=True),
        sa.Column("actor_member_id", sa.String(length=40), nullable=True),
        sa.Column("actor_member_email", sa.String(length=320), nullable=True),
        sa.Column("action", sa.String(length=100), nullable=False),
        sa.Column("target_type", sa.String(length=40), nullable=True),
        sa.Column("target_id", sa.String(length=200), nullable=True),
        sa.Column("target_name", sa.String(length=300), nullable=True),
        sa.Column("request_id", sa.String(length=128), nullable=True),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], name=op.f("fk_audit_events_org_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events") as batch_op:
        batch_op.create_index("ix_audit_events_org_id_id", ["org_id", "id"])
        batch_op.create_index("ix_audit_events_org_id_action_id", ["org_id", "action", "id"])
        batch_op.create_index("ix_audit_events_org_id_target", ["org_id", "target_type", "target_id", "id"])
        batch_op.create_index("ix_audit_events_org_id_actor_member", ["org_id", "actor_member_id", "id"])
        batch_op.create_index("ix_audit_events_org_id_actor_key", ["org_id", "actor_key_id", "id"])
    for statement in SQLITE_GUARDS if op.get_bind().dialect.name == "sqlite" else POSTGRESQL_GUARDS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION audit_events_append_only()")
    op.drop_table("audit_events")
    with op.batch_alter_table("api_keys") as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_member_id"))
        batch_op.drop_constraint(op.f("fk_api_keys_member_id_members"), type_="foreignkey")
        batch_op.drop_column("member_id")
        batch_op.drop_column("role")
    op.drop_table("members")
