"""environments

Revision ID: 0002_environments
Revises: 0001_foundation
Create Date: 2026-11-22 03:22:05.826128
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = '0002_environments'
down_revision = '0001_foundation'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('environments',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('target', sa.String(length=20), nullable=False),
    sa.Column('webhook_url', sa.String(length=2000), nullable=True),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_environments_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_environments')),
    sa.UniqueConstraint('org_id', 'name', name='uq_environments_org_id_name')
    )
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.create_index('ix_environments_org_id_target', ['org_id', 'target'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.drop_index('ix_environments_org_id_target')

    op.drop_table('environments')
