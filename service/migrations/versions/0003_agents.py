"""agents with immutable versions, and fleets

Revision ID: 0003_agents
Revises: 0002_environments
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = '0003_agents'
down_revision = '0002_environments'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('fleets',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_fleets_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_fleets')),
    sa.UniqueConstraint('org_id', 'name', name='uq_fleets_org_id_name')
    )
    with op.batch_alter_table('fleets', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fleets_org_id'), ['org_id'], unique=False)

    op.create_table('agents',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('stable_key', sa.String(length=100), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('provider_config', sa.JSON(), nullable=False),
    sa.Column('prompt_references', sa.JSON(), nullable=False),
    sa.Column('fleet_id', sa.String(length=40), nullable=True),
    sa.Column('latest_version', sa.Integer(), nullable=True),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('archived_at', service.storage.db.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['fleet_id'], ['fleets.id'], name=op.f('fk_agents_fleet_id_fleets'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_agents_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agents')),
    sa.UniqueConstraint('org_id', 'stable_key', name='uq_agents_org_id_stable_key')
    )
    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_agents_fleet_id'), ['fleet_id'], unique=False)
        batch_op.create_index('ix_agents_org_id_provider', ['org_id', 'provider'], unique=False)

    op.create_table('fleet_environments',
    sa.Column('fleet_id', sa.String(length=40), nullable=False),
    sa.Column('environment_id', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['environment_id'], ['environments.id'], name=op.f('fk_fleet_environments_environment_id_environments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['fleet_id'], ['fleets.id'], name=op.f('fk_fleet_environments_fleet_id_fleets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('fleet_id', 'environment_id', name=op.f('pk_fleet_environments'))
    )
    with op.batch_alter_table('fleet_environments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fleet_environments_environment_id'), ['environment_id'], unique=False)

    op.create_table('agent_tags',
    sa.Column('agent_id', sa.String(length=40), nullable=False),
    sa.Column('tag', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], name=op.f('fk_agent_tags_agent_id_agents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('agent_id', 'tag', name=op.f('pk_agent_tags'))
    )
    with op.batch_alter_table('agent_tags', schema=None) as batch_op:
        batch_op.create_index('ix_agent_tags_tag_agent_id', ['tag', 'agent_id'], unique=False)

    op.create_table('agent_versions',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('agent_id', sa.String(length=40), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('snapshot', sa.JSON(), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], name=op.f('fk_agent_versions_agent_id_agents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agent_versions')),
    sa.UniqueConstraint('agent_id', 'number', name='uq_agent_versions_agent_id_number')
    )


def downgrade() -> None:
    op.drop_table('agent_versions')
    with op.batch_alter_table('agent_tags', schema=None) as batch_op:
        batch_op.drop_index('ix_agent_tags_tag_agent_id')

    op.drop_table('agent_tags')
    with op.batch_alter_table('fleet_environments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fleet_environments_environment_id'))

    op.drop_table('fleet_environments')
    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.drop_index('ix_agents_org_id_provider')
        batch_op.drop_index(batch_op.f('ix_agents_fleet_id'))

    op.drop_table('agents')
    with op.batch_alter_table('fleets', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fleets_org_id'))

    op.drop_table('fleets')
