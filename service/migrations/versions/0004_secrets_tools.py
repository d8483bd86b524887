"""secrets, tools and tool deployment records

Revision ID: 0004_secrets_tools
Revises: 0002_environments
Create Date: 2026-11-22 05:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = '0004_secrets_tools'
down_revision = '0002_environments'
branch_labels = None
depends_on = None

ORG_WIDE = sa.text('environment_id IS NULL')


def upgrade() -> None:
    op.create_table('secrets',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('environment_id', sa.String(length=40), nullable=True),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('ciphertext', sa.Text(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['environment_id'], ['environments.id'], name=op.f('fk_secrets_environment_id_environments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_secrets_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_secrets')),
    sa.UniqueConstraint('environment_id', 'name', name='uq_secrets_environment_id_name')
    )
    with op.batch_alter_table('secrets', schema=None) as batch_op:
        batch_op.create_index('ix_secrets_org_id_environment_id', ['org_id', 'environment_id'], unique=False)
        batch_op.create_index('uq_secrets_org_wide_name', ['org_id', 'name'], unique=True, sqlite_where=ORG_WIDE, postgresql_where=ORG_WIDE)

    op.create_table('tools',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('tool_key', sa.String(length=128), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('input_schema', sa.JSON(), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_tools_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tools')),
    sa.UniqueConstraint('org_id', 'tool_key', name='uq_tools_org_id_tool_key')
    )
    with op.batch_alter_table('tools', schema=None) as batch_op:
        batch_op.create_index('ix_tools_org_id_name', ['org_id', 'name'], unique=False)

    op.create_table('tool_deployment_records',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('environment_id', sa.String(length=40), nullable=False),
    sa.Column('tool_key', sa.String(length=128), nullable=False),
    sa.Column('tool_name', sa.String(length=200), nullable=False),
    sa.Column('provider', sa.String(length=200), nullable=False),
    sa.Column('tool_id', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=200), nullable=False),
    sa.Column('hash', sa.String(length=200), nullable=False),
    sa.Column('tool_provider_config', sa.JSON(), nullable=True),
    sa.Column('deployed_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['environment_id'], ['environments.id'], name=op.f('fk_tool_deployment_records_environment_id_environments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_tool_deployment_records_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tool_deployment_records')),
    sa.UniqueConstraint('environment_id', 'tool_key', name='uq_tool_deployment_records_environment_id_tool_key')
    )
    with op.batch_alter_table('tool_deployment_records', schema=None) as batch_op:
        batch_op.create_index('ix_tool_deployment_records_org_id_tool_key', ['org_id', 'tool_key'], unique=False)
        batch_op.create_index('ix_tool_deployment_records_org_id_tool_name', ['org_id', 'tool_name'], unique=False)

    op.create_table('tool_deployment_history',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('record_id', sa.String(length=40), nullable=False),
    sa.Column('provider', sa.String(length=200), nullable=False),
    sa.Column('tool_id', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=200), nullable=False),
    sa.Column('hash', sa.String(length=200), nullable=False),
    sa.Column('deployed_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('replaced_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['record_id'], ['tool_deployment_records.id'], name=op.f('fk_tool_deployment_history_record_id_tool_deployment_records'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tool_deployment_history'))
    )
    with op.batch_alter_table('tool_deployment_history', schema=None) as batch_op:
        batch_op.create_index('ix_tool_deployment_history_record_id_replaced_at', ['record_id', 'replaced_at'], unique=False)


def downgrade() -> None:
    op.drop_table('tool_deployment_history')
    op.drop_table('tool_deployment_records')
    op.drop_table('tools')
    op.drop_table('secrets')
