"""providers and governance policies

Revision ID: 0006_providers_governance
Revises: 0001_foundation
Create Date: 2026-11-22 03:35:25.173906
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = '0006_providers_governance'
down_revision = '0001_foundation'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('governance_policies',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('category', sa.String(length=20), nullable=False),
    sa.Column('severity', sa.String(length=20), nullable=False),
    sa.Column('rule_text', sa.Text(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('drafted_with', sa.String(length=200), nullable=True),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_governance_policies_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_governance_policies')),
    sa.UniqueConstraint('org_id', 'name', name='uq_governance_policies_org_id_name')
    )
    with op.batch_alter_table('governance_policies', schema=None) as batch_op:
        batch_op.create_index('ix_governance_policies_org_id_category_severity', ['org_id', 'category', 'severity'], unique=False)

    op.create_table('llm_providers',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('base_url', sa.String(length=2000), nullable=False),
    sa.Column('api_version', sa.String(length=40), nullable=True),
    sa.Column('api_key_encrypted', sa.Text(), nullable=True),
    sa.Column('api_key_last4', sa.String(length=4), nullable=True),
    sa.Column('models', sa.JSON(), nullable=False),
    sa.Column('default_model', sa.String(length=200), nullable=True),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_llm_providers_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_llm_providers')),
    sa.UniqueConstraint('org_id', 'name', name='uq_llm_providers_org_id_name')
    )
    with op.batch_alter_table('llm_providers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_llm_providers_org_id'), ['org_id'], unique=False)

    op.create_table('governance_policy_versions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('policy_id', sa.String(length=40), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('category', sa.String(length=20), nullable=False),
    sa.Column('severity', sa.String(length=20), nullable=False),
    sa.Column('rule_text', sa.Text(), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['policy_id'], ['governance_policies.id'], name=op.f('fk_governance_policy_versions_policy_id_governance_policies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_governance_policy_versions')),
    sa.UniqueConstraint('policy_id', 'version', name='uq_governance_policy_versions_policy_id_version')
    )


def downgrade() -> None:
    op.drop_table('governance_policy_versions')
    with op.batch_alter_table('llm_providers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_llm_providers_org_id'))

    op.drop_table('llm_providers')
    with op.batch_alter_table('governance_policies', schema=None) as batch_op:
        batch_op.drop_index('ix_governance_policies_org_id_category_severity')

    op.drop_table('governance_policies')
