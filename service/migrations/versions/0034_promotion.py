"""environments carry their promotion path and gates: promotes_from, require_promotion,
soak_minutes, production

Revision ID: 0034_promotion
Revises: 0033_retention
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034_promotion"
down_revision = "0033_retention"
branch_labels = None
depends_on = None

COLUMNS = ("promotes_from", "require_promotion", "soak_minutes", "production")


# Plain ALTER TABLE on both databases: a table rebuild on SQLite would drop environments' triggers
# (0023). Existing environments get the defaults through server defaults, which stay (the models
# set the same values on insert).
def upgrade() -> None:
    op.add_column("environments", sa.Column("promotes_from", sa.String(40), nullable=True))
    op.add_column(
        "environments",
        sa.Column("require_promotion", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("environments", sa.Column("soak_minutes", sa.Integer(), nullable=False, server_default="0"))
    op.add_column(
        "environments", sa.Column("production", sa.Boolean(), nullable=False, server_default=sa.false())
    )


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column("environments", column)
