"""change requests carry a secret sealed: a secret's value or a new signing key, encrypted

Revision ID: 0028_change_request_sealed
Revises: 0027_idempotency_callers
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_change_request_sealed"
down_revision = "0027_idempotency_callers"
branch_labels = None
depends_on = None


# Plain ALTER TABLE (SQLite 3.35+ drops columns too): a batch would copy and drop change_requests,
# and dropping it would cascade to every review.
def upgrade() -> None:
    op.add_column("change_requests", sa.Column("sealed", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("change_requests", "sealed")
