"""Prompt registries: create, soft delete and restore; publish immutable versions; move labels; read.

Reads take `reader_org_id`: the organization of the caller's key, or None without a key. Public
registries are readable by anyone; a private one only with a key of its organization (no key: 401;
another organization's key: 404, as if it did not exist).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlalchemy import Select, bindparam, case, func, select
from sqlalchemy.orm import Session

from api.common import Page
from api.registries import (
    LATEST_LABEL,
    PRODUCTION_LABEL,
    Artifact,
    ArtifactVersion,
    ChatMessage,
    PublishedArtifact,
    Registry,
    RetrievedArtifact,
    Visibility,
    canonical_content,
    content_type,
    registry_ref,
    template_variables,
)
from service.changes.protection import require_review_of_labels
from service.db import insert_unless_taken, utcnow
from service.errors import AlreadyExists, InvalidInput, NotFound, Unauthorized
from service.orgs.models import Organization
from service.registries.models import Registry as RegistryRow
from service.registries.models import RegistryArtifact, RegistryArtifactLabel, RegistryArtifactVersion

# Retrieve with neither version nor label: `production` when set, else `latest`.
DEFAULT_LABELS = (PRODUCTION_LABEL, LATEST_LABEL)


@dataclass(frozen=True)
class Retrieval:
    artifact: RetrievedArtifact
    public: bool
    by_version: bool


# -- registries ---------------------------------------------------------------------------


def create_registry(
    session: Session, *, org_id: str, name: str, visibility: Visibility, description: str
) -> Registry:
    row = RegistryRow(org_id=org_id, name=name, visibility=visibility, description=description)
    if not insert_unless_taken(session, row):
        existing = session.scalar(
            select(RegistryRow).where(RegistryRow.org_id == org_id, RegistryRow.name == name)
        )
        if existing is not None and existing.deleted_at is not None:
            raise AlreadyExists(
                f"Registry '{name}' exists but is deleted: restore it (POST /registries/restore) "
                "or choose another name",
                field="name",
            )
        raise AlreadyExists(f"Registry '{name}' already exists", field="name")
    return _registry_record(session, row)


def list_registries(
    session: Session, *, org_id: str, include_deleted: bool, limit: int, offset: int
) -> Page[Registry]:
    """The organization's registries by name, with their artifact and version counts."""
    counts = (
        select(
            RegistryArtifact.registry_id,
            func.count().label("artifacts"),
            func.sum(RegistryArtifact.version_count).label("versions"),
        )
        .group_by(RegistryArtifact.registry_id)
        .subquery()
    )
    conditions = [RegistryRow.org_id == org_id]
    if not include_deleted:
        conditions.append(RegistryRow.deleted_at.is_(None))
    total = session.scalar(select(func.count()).select_from(RegistryRow).where(*conditions)) or 0
    rows = session.execute(
        select(RegistryRow, counts.c.artifacts, counts.c.versions)
        .outerjoin(counts, counts.c.registry_id == RegistryRow.id)
        .where(*conditions)
        .order_by(RegistryRow.name)
        .limit(limit)
        .offset(offset)
    ).all()
    items = [
        _registry_record(session, row, artifacts or 0, versions or 0) for row, artifacts, versions in rows
    ]
    return Page[Registry](items=items, limit=limit, offset=offset, total=total)


def delete_registry(session: Session, *, org_id: str, ref: str) -> Registry:
    """Soft delete: the registry and its artifacts answer 404 from now on; every row stays. One with
    protected labels is refused: deleting it would change what they serve without a review."""
    row = _owned_registry(session, org_id=org_id, ref=ref)
    if row.protected_labels:
        labels = ", ".join(row.protected_labels)
        raise InvalidInput(
            f"Registry '{ref}' has protected labels ({labels}): an admin unprotects them "
            "(PATCH /registries) before it can be deleted",
            field="registryRef",
            code="protected",
        )
    row.deleted_at = utcnow()
    session.flush()
    return _registry_record(session, row)


def restore_registry(session: Session, *, org_id: str, ref: str) -> Registry:
    """Undo a soft delete. Restoring a registry that is not deleted changes nothing."""
    row = _owned_registry(session, org_id=org_id, ref=ref, include_deleted=True)
    row.deleted_at = None
    session.flush()
    return _registry_record(session, row)


# -- publishing and labels ----------------------------------------------------------------


def publish(
    session: Session,
    *,
    org_id: str,
    ref: str,
    name: str,
    content: str | list[ChatMessage],
    version: str | None,
    labels: list[str],
    metadata: dict[str, Any],
    commit_message: str,
) -> PublishedArtifact:
    """Publish a version, or return the one that already has this content.

    With `version`: an existing version with the same content is returned unchanged; with other
    content it is refused. Without: content equal to the newest version's returns that version, any
    other content becomes the next number. `labels` are moved onto the version either way.
    """
    registry = _owned_registry(session, org_id=org_id, ref=ref, lock=True)
    require_review_of_labels(registry, labels)
    artifact = session.scalar(
        select(RegistryArtifact).where(
            RegistryArtifact.registry_id == registry.id, RegistryArtifact.name == name
        )
    )
    if artifact is None:
        artifact = RegistryArtifact(registry_id=registry.id, name=name, version_count=0)
        session.add(artifact)
        session.flush()
    serialized = canonical_content(content)
    content_hash = "sha256:" + hashlib.sha256(serialized.encode()).hexdigest()
    existing = _existing_version(session, artifact, version)
    if version is not None and existing is not None and existing.content_hash != content_hash:
        raise InvalidInput(
            f"Version {version} of '{name}' is already published with other content, and versions never "
            "change: publish it as a new version",
            field="version",
            code="version_exists",
        )
    created = existing is None or (version is None and existing.content_hash != content_hash)
    if created:
        existing = _add_version(
            session,
            artifact,
            version=version,
            content=content,
            serialized=serialized,
            content_hash=content_hash,
            metadata=metadata,
            commit_message=commit_message,
        )
    assert existing is not None
    for label in labels:
        _point_label(session, artifact.id, label, existing.id)
    session.flush()
    return PublishedArtifact(
        **_version_fields(ref, name, existing),
        content=_content(existing),
        created=created,
        labels=_labels_of_versions(session, [existing.id])[existing.id],
    )


def _existing_version(
    session: Session, artifact: RegistryArtifact, version: str | None
) -> RegistryArtifactVersion | None:
    """The version a publish is compared with: the named one, or else the newest."""
    condition = (
        RegistryArtifactVersion.version == version
        if version is not None
        else RegistryArtifactVersion.number == artifact.version_count
    )
    return session.scalar(
        select(RegistryArtifactVersion).where(RegistryArtifactVersion.artifact_id == artifact.id, condition)
    )


def _add_version(
    session: Session,
    artifact: RegistryArtifact,
    *,
    version: str | None,
    content: str | list[ChatMessage],
    serialized: str,
    content_hash: str,
    metadata: dict[str, Any],
    commit_message: str,
) -> RegistryArtifactVersion:
    # The registry row is locked (or, on SQLite, the database is), so the count cannot move under us.
    number = artifact.version_count + 1
    row = RegistryArtifactVersion(
        artifact_id=artifact.id,
        number=number,
        version=version or str(number),
        content_type=content_type(content),
        content=content if isinstance(content, str) else serialized,
        content_hash=content_hash,
        variables=template_variables(content),
        metadata_=metadata,
        commit_message=commit_message,
    )
    session.add(row)
    artifact.version_count = number
    artifact.updated_at = row.created_at = utcnow()
    session.flush()
    _point_label(session, artifact.id, LATEST_LABEL, row.id)
    return row


def move_label(
    session: Session, *, org_id: str, ref: str, name: str, label: str, version: str, reviewed: bool = False
) -> ArtifactVersion:
    """Point `label` at `version` of the artifact, taking it off any other version. A protected
    label moves only by an approved change request (`reviewed`)."""
    registry = _owned_registry(session, org_id=org_id, ref=ref, lock=True)
    if not reviewed:
        require_review_of_labels(registry, [label])
    artifact = _artifact(session, registry, ref, name)
    row = _version(session, artifact, version)
    _point_label(session, artifact.id, label, row.id)
    session.flush()
    return ArtifactVersion(
        **_version_fields(ref, name, row), labels=_labels_of_versions(session, [row.id])[row.id]
    )


def label_move(
    session: Session, *, org_id: str, ref: str, name: str, label: str, version: str
) -> tuple[RegistryArtifactVersion | None, RegistryArtifactVersion]:
    """The version `label` points at now (None if nowhere) and the one it would point at."""
    registry = _owned_registry(session, org_id=org_id, ref=ref)
    artifact = _artifact(session, registry, ref, name)
    target = _version(session, artifact, version)
    pointer = session.get(RegistryArtifactLabel, (artifact.id, label))
    current = session.get(RegistryArtifactVersion, pointer.version_id) if pointer is not None else None
    return current, target


def update_registry(
    session: Session, *, org_id: str, ref: str, protected_labels: list[str] | None
) -> Registry:
    """Set the registry's protected labels (those moved only through approved change requests)."""
    row = _owned_registry(session, org_id=org_id, ref=ref, lock=True)
    if protected_labels is not None and protected_labels != row.protected_labels:
        row.protected_labels = protected_labels
        session.flush()
    return _registry_record(session, row)


def content_text(row: RegistryArtifactVersion) -> str:
    """A version's content as lines a diff compares: the text, or the chat messages one per block."""
    if row.content_type == "text":
        return row.content
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in json.loads(row.content))


def _point_label(session: Session, artifact_id: str, label: str, version_id: str) -> None:
    row = session.get(RegistryArtifactLabel, (artifact_id, label))
    if row is None:
        session.add(RegistryArtifactLabel(artifact_id=artifact_id, label=label, version_id=version_id))
    elif row.version_id != version_id:
        row.version_id = version_id
        row.updated_at = utcnow()


# -- reading ------------------------------------------------------------------------------


def list_artifacts(
    session: Session, *, reader_org_id: str | None, ref: str, limit: int, offset: int
) -> Page[Artifact]:
    """The registry's artifacts by name, each with where its labels point."""
    registry = _readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    condition = RegistryArtifact.registry_id == registry.id
    total = session.scalar(select(func.count()).select_from(RegistryArtifact).where(condition)) or 0
    artifacts = list(
        session.scalars(
            select(RegistryArtifact)
            .where(condition)
            .order_by(RegistryArtifact.name)
            .limit(limit)
            .offset(offset)
        )
    )
    labels: dict[str, dict[str, str]] = {artifact.id: {} for artifact in artifacts}
    pointers = session.execute(
        select(
            RegistryArtifactLabel.artifact_id, RegistryArtifactLabel.label, RegistryArtifactVersion.version
        )
        .join(RegistryArtifactVersion, RegistryArtifactVersion.id == RegistryArtifactLabel.version_id)
        .where(RegistryArtifactLabel.artifact_id.in_(list(labels)))
        .order_by(RegistryArtifactLabel.label)
    )
    for artifact_id, label, version in pointers:
        labels[artifact_id][label] = version
    items = [
        Artifact(
            name=artifact.name,
            latest_version=labels[artifact.id].get(LATEST_LABEL, ""),
            version_count=artifact.version_count,
            labels=labels[artifact.id],
            created_at=artifact.created_at,
            updated_at=artifact.updated_at,
        )
        for artifact in artifacts
    ]
    return Page[Artifact](items=items, limit=limit, offset=offset, total=total)


def list_versions(
    session: Session, *, reader_org_id: str | None, ref: str, name: str, limit: int, offset: int
) -> Page[ArtifactVersion]:
    """The artifact's versions, newest first, without their content."""
    registry = _readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    artifact = _artifact(session, registry, ref, name)
    rows = list(
        session.scalars(
            select(RegistryArtifactVersion)
            .where(RegistryArtifactVersion.artifact_id == artifact.id)
            .order_by(RegistryArtifactVersion.number.desc())
            .limit(limit)
            .offset(offset)
        )
    )
    labels = _labels_of_versions(session, [row.id for row in rows])
    items = [ArtifactVersion(**_version_fields(ref, name, row), labels=labels[row.id]) for row in rows]
    return Page[ArtifactVersion](items=items, limit=limit, offset=offset, total=artifact.version_count)


def _version_lookup() -> Select[Any]:
    """From the organization's slug down to one artifact's versions, joined through unique indexes."""
    return (
        select(RegistryArtifactVersion, RegistryRow.visibility, RegistryRow.org_id)
        .join(RegistryArtifact, RegistryArtifact.id == RegistryArtifactVersion.artifact_id)
        .join(RegistryRow, RegistryRow.id == RegistryArtifact.registry_id)
        .join(Organization, Organization.id == RegistryRow.org_id)
        .where(
            Organization.slug == bindparam("org_slug"),
            RegistryRow.name == bindparam("registry_name"),
            RegistryRow.deleted_at.is_(None),
            RegistryArtifact.name == bindparam("name"),
        )
    )


# Built once: constructing a statement costs more than running it on the read path.
_BY_VERSION = _version_lookup().where(RegistryArtifactVersion.version == bindparam("version"))
_BY_LABEL = (
    _version_lookup()
    .add_columns(RegistryArtifactLabel.label)
    .join(
        RegistryArtifactLabel,
        (RegistryArtifactLabel.artifact_id == RegistryArtifact.id)
        & (RegistryArtifactLabel.version_id == RegistryArtifactVersion.id),
    )
    .where(RegistryArtifactLabel.label.in_(bindparam("labels", expanding=True)))
    # Of the labels asked for, production first (the default is production, else latest).
    .order_by(case((RegistryArtifactLabel.label == PRODUCTION_LABEL, 0), else_=1))
    .limit(1)
)


def retrieve(
    session: Session,
    *,
    reader_org_id: str | None,
    ref: str,
    name: str,
    version: str | None,
    label: str | None,
) -> Retrieval:
    """One version by number or semantic version, by label, or else `production` then `latest`.

    The hot path of the registry: one indexed query from the organization's slug to the version.
    Only when it finds nothing readable do the slower lookups run, to say precisely what is missing.
    """
    org_slug, registry_name = _split(ref)
    parameters: dict[str, Any] = {"org_slug": org_slug, "registry_name": registry_name, "name": name}
    if version is not None:
        query, parameters["version"] = _BY_VERSION, version
    else:
        query, parameters["labels"] = _BY_LABEL, [label] if label is not None else list(DEFAULT_LABELS)
    found = session.execute(query, parameters).first()
    if found is None or (found.visibility != "public" and found.org_id != reader_org_id):
        _explain_missing(
            session, reader_org_id=reader_org_id, ref=ref, name=name, version=version, label=label
        )
    row = found[0]
    artifact = RetrievedArtifact(
        **_version_fields(ref, name, row),
        content=_content(row),
        label=found.label if version is None else None,
    )
    return Retrieval(
        artifact=artifact,
        public=found.visibility == "public",
        by_version=version is not None,
    )


def _explain_missing(
    session: Session,
    *,
    reader_org_id: str | None,
    ref: str,
    name: str,
    version: str | None,
    label: str | None,
) -> NoReturn:
    """Raise the error that says what a retrieve could not find (access first, so nothing leaks)."""
    registry = _readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    artifact = _artifact(session, registry, ref, name)
    if version is not None:
        _version(session, artifact, version)
    if label is not None:
        set_labels = sorted(
            session.scalars(
                select(RegistryArtifactLabel.label).where(RegistryArtifactLabel.artifact_id == artifact.id)
            )
        )
        raise InvalidInput(
            f"Artifact '{name}' has no label '{label}'; its labels are: {', '.join(set_labels)}",
            field="label",
            code="unknown_label",
        )
    # Only a publish committed between the two lookups gets here; the next attempt finds it.
    raise NotFound(f"Artifact '{name}' was being published while it was read; retry", field="name")


# -- lookups ------------------------------------------------------------------------------


def _split(ref: str) -> tuple[str, str]:
    org_slug, _, name = ref.partition("/")
    return org_slug, name


def _owned_registry(
    session: Session, *, org_id: str, ref: str, lock: bool = False, include_deleted: bool = False
) -> RegistryRow:
    """A registry of the caller's own organization, or 404 (another organization's is absent too)."""
    org_slug, name = _split(ref)
    query = (
        select(RegistryRow)
        .join(Organization, Organization.id == RegistryRow.org_id)
        .where(RegistryRow.org_id == org_id, Organization.slug == org_slug, RegistryRow.name == name)
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


def _readable_registry(session: Session, *, reader_org_id: str | None, ref: str) -> RegistryRow:
    org_slug, name = _split(ref)
    row = session.scalar(
        select(RegistryRow)
        .join(Organization, Organization.id == RegistryRow.org_id)
        .where(Organization.slug == org_slug, RegistryRow.name == name, RegistryRow.deleted_at.is_(None))
    )
    if row is not None and (row.visibility == "public" or row.org_id == reader_org_id):
        return row
    if reader_org_id is None:
        # The same answer whether it is private or absent: a caller without a key learns nothing.
        raise Unauthorized(
            f"Registry '{ref}' is private or does not exist: send an API key of its organization"
        )
    raise NotFound(f"No registry '{ref}'", field="registryRef")


def _artifact(session: Session, registry: RegistryRow, ref: str, name: str) -> RegistryArtifact:
    artifact = session.scalar(
        select(RegistryArtifact).where(
            RegistryArtifact.registry_id == registry.id, RegistryArtifact.name == name
        )
    )
    if artifact is None:
        raise NotFound(f"No artifact '{name}' in registry '{ref}'", field="name")
    return artifact


def _version(session: Session, artifact: RegistryArtifact, version: str) -> RegistryArtifactVersion:
    row = session.scalar(
        select(RegistryArtifactVersion).where(
            RegistryArtifactVersion.artifact_id == artifact.id, RegistryArtifactVersion.version == version
        )
    )
    if row is None:
        raise NotFound(f"Artifact '{artifact.name}' has no version '{version}'", field="version")
    return row


def _labels_of_versions(session: Session, version_ids: list[str]) -> dict[str, list[str]]:
    labels: dict[str, list[str]] = {version_id: [] for version_id in version_ids}
    rows = session.execute(
        select(RegistryArtifactLabel.version_id, RegistryArtifactLabel.label)
        .where(RegistryArtifactLabel.version_id.in_(version_ids))
        .order_by(RegistryArtifactLabel.label)
    )
    for version_id, label in rows:
        labels[version_id].append(label)
    return labels


# -- records ------------------------------------------------------------------------------


def _registry_record(
    session: Session, row: RegistryRow, artifact_count: int | None = None, version_count: int | None = None
) -> Registry:
    if artifact_count is None or version_count is None:
        artifact_count, version_count = session.execute(
            select(func.count(), func.coalesce(func.sum(RegistryArtifact.version_count), 0)).where(
                RegistryArtifact.registry_id == row.id
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


def _version_fields(ref: str, name: str, row: RegistryArtifactVersion) -> dict[str, Any]:
    return {
        "registry_ref": ref,
        "name": name,
        "version": row.version,
        "number": row.number,
        "content_type": row.content_type,
        "content_hash": row.content_hash,
        "variables": row.variables,
        "metadata": row.metadata_,
        "commit_message": row.commit_message,
        "created_at": row.created_at,
    }


def _content(row: RegistryArtifactVersion) -> str | list[dict[str, str]]:
    return row.content if row.content_type == "text" else json.loads(row.content)
