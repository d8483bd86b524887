"""Finding a registry, artifact or version for a caller (its own organization's, or a readable one;
404 or 401 otherwise, never a hint that a private one exists) and turning rows into records."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.approvals import ChangeRequestRef
from api.registries import (
    ArtifactVersion,
    Registry,
    registry_ref,
)
from service.errors import NotFound, Unauthorized
from service.orgs.models import OrganizationRow
from service.redaction.objects import redacted
from service.registries.models import (
    RegistryArtifactLabelRow,
    RegistryArtifactRow,
    RegistryArtifactVersionRow,
    RegistryRow,
)


def split_ref(ref: str) -> tuple[str, str]:
    org_slug, _, name = ref.partition("/")
    return org_slug, name


def owned_registry(
    session: Session, *, org_id: str, ref: str, lock: bool = False, include_deleted: bool = False
) -> RegistryRow:
    """A registry of the caller's own organization, or 404 (another organization's is absent too)."""
    org_slug, name = split_ref(ref)
    query = (
        select(RegistryRow)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(RegistryRow.org_id == org_id, OrganizationRow.slug == org_slug, RegistryRow.name == name)
    )
    if not include_deleted:
        query = query.where(RegistryRow.deleted_at.is_(None))
    if lock:
        # Publishes to one registry take turns on PostgreSQL: no duplicate or skipped numbers.
        query = query.with_for_update(of=RegistryRow)
    row = session.scalar(query)
    if row is None:
        raise NotFound(f"No registry '{ref}'", field="registryRef")
    return row


def readable_registry(session: Session, *, reader_org_id: str | None, ref: str) -> RegistryRow:
    org_slug, name = split_ref(ref)
    row = session.scalar(
        select(RegistryRow)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(OrganizationRow.slug == org_slug, RegistryRow.name == name, RegistryRow.deleted_at.is_(None))
    )
    if row is not None and (row.visibility == "public" or row.org_id == reader_org_id):
        return row
    if reader_org_id is None:
        # The same answer whether it is private or absent: a caller without a key learns nothing.
        raise Unauthorized(
            f"Registry '{ref}' is private or does not exist: send an API key of its organization"
        )
    raise NotFound(f"No registry '{ref}'", field="registryRef")


def find_artifact(session: Session, registry: RegistryRow, ref: str, name: str) -> RegistryArtifactRow:
    artifact = session.scalar(
        select(RegistryArtifactRow).where(
            RegistryArtifactRow.registry_id == registry.id, RegistryArtifactRow.name == name
        )
    )
    if artifact is None:
        raise NotFound(f"No artifact '{name}' in registry '{ref}'", field="name")
    return artifact


def find_version(session: Session, artifact: RegistryArtifactRow, version: str) -> RegistryArtifactVersionRow:
    row = session.scalar(
        select(RegistryArtifactVersionRow).where(
            RegistryArtifactVersionRow.artifact_id == artifact.id,
            RegistryArtifactVersionRow.version == version,
        )
    )
    if row is None:
        raise NotFound(f"Artifact '{artifact.name}' has no version '{version}'", field="version")
    return row


def labels_of_versions(
    session: Session, version_ids: list[str]
) -> dict[str, dict[str, ChangeRequestRef | None]]:
    """The labels on each version by name, each with the change request that moved it there (None
    when it was moved directly)."""
    labels: dict[str, dict[str, ChangeRequestRef | None]] = {version_id: {} for version_id in version_ids}
    pointer = RegistryArtifactLabelRow
    rows = session.execute(
        select(pointer.version_id, pointer.label, pointer.change_request)
        .where(pointer.version_id.in_(version_ids))
        .order_by(pointer.label)
    )
    for version_id, label, moved_by in rows:
        labels[version_id][label] = moved_by
    return labels


# -- records ------------------------------------------------------------------------------


def registry_record(
    session: Session, row: RegistryRow, artifact_count: int | None = None, version_count: int | None = None
) -> Registry:
    if artifact_count is None or version_count is None:
        artifact_count, version_count = session.execute(
            select(func.count(), func.coalesce(func.sum(RegistryArtifactRow.version_count), 0)).where(
                RegistryArtifactRow.registry_id == row.id
            )
        ).one()
    return Registry(
        id=row.id,
        registry_ref=registry_ref(row.org.slug, row.name),
        name=row.name,
        visibility=row.visibility,
        description=row.description,
        artifact_count=artifact_count,
        version_count=version_count,
        protected_labels=row.protected_labels or [],
        created_at=row.created_at,
        deleted_at=row.deleted_at,
    )


def version_fields(ref: str, name: str, row: RegistryArtifactVersionRow) -> dict[str, Any]:
    """What never changes about a version, as readers see it: the credentials in its metadata redacted."""
    return {
        "id": row.id,
        "registry_ref": ref,
        "name": name,
        "version": row.version,
        "number": row.number,
        "content_type": row.content_type,
        "content_hash": row.content_hash,
        "variables": row.variables,
        "metadata": redacted(row.metadata_),
        "commit_message": row.commit_message,
        "created_at": row.created_at,
    }


def version_record(
    ref: str, name: str, row: RegistryArtifactVersionRow, labels: dict[str, ChangeRequestRef | None]
) -> ArtifactVersion:
    """A version as listings show it: with `labels` (labels_of_versions) and who moved them there."""
    return ArtifactVersion(
        **version_fields(ref, name, row),
        labels=list(labels),
        label_change_requests={label: moved_by for label, moved_by in labels.items() if moved_by is not None},
    )


def version_content(row: RegistryArtifactVersionRow) -> str | list[dict[str, str]]:
    return row.content if row.content_type == "text" else json.loads(row.content)
