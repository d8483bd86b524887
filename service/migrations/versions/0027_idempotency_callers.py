"""idempotency keys per caller: (organization, caller, key), so an answer is replayed to its caller only

The caller is a plain id (the API key's today), so another kind of credential can bring its own
subject id without another migration. The keys stored so far are dropped, in both directions: a key
lives 24 hours, and one stored without its caller cannot be told apart from another caller's.

Revision ID: 0027_idempotency_callers
Revises: 0026_changes_on_record
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_idempotency_callers"
down_revision = "0026_changes_on_record"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("DELETE FROM idempotency_keys"))
    with op.batch_alter_table("idempotency_keys") as batch_op:
        batch_op.add_column(sa.Column("caller_id", sa.String(length=255), nullable=False))
        batch_op.drop_constraint("pk_idempotency_keys", type_="primary")
        batch_op.create_primary_key("pk_idempotency_keys", ["org_id", "caller_id", "key"])


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM idempotency_keys"))
    with op.batch_alter_table("idempotency_keys") as batch_op:
        batch_op.drop_constraint("pk_idempotency_keys", type_="primary")
        batch_op.drop_column("caller_id")
        batch_op.create_primary_key("pk_idempotency_keys", ["org_id", "key"])
