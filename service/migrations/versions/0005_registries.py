"""registries

Revision ID: 0005_registries
Revises: 0001_foundation
Create Date: 2026-11-22 04:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = '0005_registries'
down_revision = '0001_foundation'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('registries',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('visibility', sa.String(length=10), nullable=False),
    sa.Column('description', sa.String(length=2000), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', service.storage.db.UTCDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_registries_org_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_registries')),
    sa.UniqueConstraint('org_id', 'name', name='uq_registries_org_id_name')
    )
    op.create_table('registry_artifacts',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('registry_id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('version_count', sa.Integer(), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['registry_id'], ['registries.id'], name=op.f('fk_registry_artifacts_registry_id_registries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_registry_artifacts')),
    sa.UniqueConstraint('registry_id', 'name', name='uq_registry_artifacts_registry_id_name')
    )
    op.create_table('registry_artifact_versions',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('artifact_id', sa.String(length=40), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('content_type', sa.String(length=10), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=71), nullable=False),
    sa.Column('variables', sa.JSON(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('commit_message', sa.String(length=2000), nullable=False),
    sa.Column('created_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['artifact_id'], ['registry_artifacts.id'], name=op.f('fk_registry_artifact_versions_artifact_id_registry_artifacts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_registry_artifact_versions')),
    sa.UniqueConstraint('artifact_id', 'number', name='uq_registry_artifact_versions_artifact_id_number'),
    sa.UniqueConstraint('artifact_id', 'version', name='uq_registry_artifact_versions_artifact_id_version')
    )
    op.create_table('registry_artifact_labels',
    sa.Column('artifact_id', sa.String(length=40), nullable=False),
    sa.Column('label', sa.String(length=40), nullable=False),
    sa.Column('version_id', sa.String(length=40), nullable=False),
    sa.Column('updated_at', service.storage.db.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['artifact_id'], ['registry_artifacts.id'], name=op.f('fk_registry_artifact_labels_artifact_id_registry_artifacts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['registry_artifact_versions.id'], name=op.f('fk_registry_artifact_labels_version_id_registry_artifact_versions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('artifact_id', 'label', name=op.f('pk_registry_artifact_labels'))
    )
    op.create_index('ix_registry_artifact_labels_version_id', 'registry_artifact_labels', ['version_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_registry_artifact_labels_version_id', table_name='registry_artifact_labels')
    op.drop_table('registry_artifact_labels')
    op.drop_table('registry_artifact_versions')
    op.drop_table('registry_artifacts')
    op.drop_table('registries')
