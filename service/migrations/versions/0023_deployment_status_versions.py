"""a version per organization of what its status matrix shows, moved by triggers on what it reads

Revision ID: 0023_deployment_status_versions
Revises: 0022_deployment_rollup_versions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_deployment_status_versions"
down_revision = "0022_deployment_rollup_versions"
branch_labels = None
depends_on = "0010_deployment_status"

# What the matrix reads of each table: any change of a pair's state, and of these columns elsewhere.
WATCHED = {
    "deployment_states": "",
    "deployment_policies": "",
    "agents": " OF stable_key, name, latest_version, archived_at",
    "environments": " OF name",
}
BUMP = (
    "INSERT INTO deployment_status_versions (org_id, version) VALUES ({org}, 1) "
    "ON CONFLICT (org_id) DO UPDATE SET version = deployment_status_versions.version + 1"
)


def _sqlite_triggers() -> list[str]:
    """SQLite writes one transaction at a time: a row trigger can move the version at once."""
    triggers = []
    for table, columns in WATCHED.items():
        for event, row in (("INSERT", "NEW"), (f"UPDATE{columns}", "NEW"), ("DELETE", "OLD")):
            name = f"{table}_status_{event.split()[0].lower()}"
            body = BUMP.format(org=f"{row}.org_id")
            triggers.append(f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN {body}; END")
    return triggers


# PostgreSQL moves the version when the transaction commits (a deferred constraint trigger), once per
# org: the version row is then the last lock a writer takes, so it queues writers but never closes a
# cycle with the row locks they took before (one org per transaction; see states.check_due_states).
POSTGRESQL_FUNCTION = f"""
    CREATE FUNCTION deployment_status_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        org text := CASE WHEN TG_OP = 'DELETE' THEN OLD.org_id ELSE NEW.org_id END;
    BEGIN
        IF current_setting('orgdeck.status_moved', true) IS DISTINCT FROM org THEN
            PERFORM set_config('orgdeck.status_moved', org, true);
            {BUMP.format(org="org")};
        END IF;
        RETURN NULL;
    END $$
"""


def _postgresql_triggers() -> list[str]:
    return [POSTGRESQL_FUNCTION] + [
        f"CREATE CONSTRAINT TRIGGER {table}_status AFTER INSERT OR UPDATE{columns} OR DELETE ON {table} "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION deployment_status_changed()"
        for table, columns in WATCHED.items()
    ]


def upgrade() -> None:
    op.create_table(
        "deployment_status_versions",
        sa.Column("org_id", sa.String(length=40), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in _postgresql_triggers() if postgresql else _sqlite_triggers():
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in WATCHED:
            op.execute(f"DROP TRIGGER {table}_status ON {table}")
        op.execute("DROP FUNCTION deployment_status_changed()")
    else:
        for table in WATCHED:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_status_{event}")
    op.drop_table("deployment_status_versions")
