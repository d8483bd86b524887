"""Prompt registries: create, soft delete and restore; publish immutable versions; move labels; read.

Reads take `reader_org_id`: the organization of the caller's key, or None without a key. Public
registries are readable by anyone; a private one only with a key of its organization (no key: 401;
another organization's key: 404, as if it did not exist).

A registry's protected labels move only by an approved change request, which the label then names
(`change_request`, kept with it as it was applied).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from sqlalchemy import Select, bindparam, case, func, select
from sqlalchemy.orm import Session

from api.approvals import ChangeRequestRef
from api.common import Page
from api.registries import (
    LATEST_LABEL,
    PRODUCTION_LABEL,
    Artifact,
    ArtifactVersion,
    ChatMessage,
    CreateRegistry,
    MoveLabel,
    PromptRun,
    PublishArtifact,
    PublishedArtifact,
    Registry,
    RetrievedArtifact,
    TryPrompt,
    canonical_content,
    content_type,
    missing_variables,
    rendered,
    template_variables,
)
from api.registries import content_text as rendered_text
from service.errors import AlreadyExists, ApprovalRequired, InvalidInput, NotFound
from service.http.etags import TaggedJson, tagged_json
from service.orgs.models import OrganizationRow
from service.providers import service as providers
from service.providers.adapters import ModelEndpoint
from service.redaction.objects import restored
from service.registries.lookups import (
    find_artifact,
    find_version,
    labels_of_versions,
    owned_registry,
    readable_registry,
    registry_record,
    split_ref,
    version_content,
    version_fields,
    version_record,
)
from service.registries.models import (
    RegistryArtifactLabelRow,
    RegistryArtifactRow,
    RegistryArtifactVersionRow,
    RegistryRow,
)
from service.settings import Settings
from service.storage.crypto import Cipher
from service.storage.db import insert_unless_taken, utcnow
from service.storage.memory import Kept

# A tried prompt's answer is read, not used: long enough to judge it, short enough to wait for.
TRY_MAX_TOKENS = 1024
# Chat messages of these roles instruct the model; the others are the conversation it answers.
INSTRUCTING_ROLES = ("system", "developer")

# Retrieve with neither version nor label: `production` when set, else `latest`.
DEFAULT_LABELS = (PRODUCTION_LABEL, LATEST_LABEL)


# Versions never change, so the answer about one is kept in the process (see _answer): bodies of
# up to 64 KB, 32 MB of them in all (some 30,000 prompts of a typical size).
KEPT_BYTES = 32 * 1024 * 1024
KEPT_BODY_BYTES = 64 * 1024
_kept_versions = Kept[TaggedJson](KEPT_BYTES, cost=lambda answer: len(answer.body))


@dataclass(frozen=True)
class Retrieval:
    answer: TaggedJson
    public: bool
    by_version: bool


# -- registries ---------------------------------------------------------------------------


def create_registry(session: Session, *, org_id: str, request: CreateRegistry) -> Registry:
    name = request.name
    row = RegistryRow(
        org_id=org_id, name=name, visibility=request.visibility, description=request.description
    )
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
    return registry_record(session, row)


def list_registries(
    session: Session, *, org_id: str, include_deleted: bool, limit: int, offset: int
) -> Page[Registry]:
    """The organization's registries by name, with their artifact and version counts."""
    counts = (
        select(
            RegistryArtifactRow.registry_id,
            func.count().label("artifacts"),
            func.sum(RegistryArtifactRow.version_count).label("versions"),
        )
        .group_by(RegistryArtifactRow.registry_id)
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
        registry_record(session, row, artifacts or 0, versions or 0) for row, artifacts, versions in rows
    ]
    return Page[Registry](items=items, limit=limit, offset=offset, total=total)


def delete_registry(session: Session, *, org_id: str, ref: str) -> Registry:
    """Soft delete: the registry and its artifacts answer 404 from now on; every row stays. One with
    protected labels is refused: deleting it would change what they serve without a review."""
    row = owned_registry(session, org_id=org_id, ref=ref)
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
    return registry_record(session, row)


def restore_registry(session: Session, *, org_id: str, ref: str) -> Registry:
    """Undo a soft delete. Restoring a registry that is not deleted changes nothing."""
    row = owned_registry(session, org_id=org_id, ref=ref, include_deleted=True)
    row.deleted_at = None
    session.flush()
    return registry_record(session, row)


# -- publishing and labels ----------------------------------------------------------------


def publish(session: Session, *, org_id: str, request: PublishArtifact) -> PublishedArtifact:
    """Publish a version, or return the one that already has this content.

    With `version`: an existing version with the same content is returned unchanged; with other
    content it is refused. Without: content equal to the newest version's returns that version, any
    other content becomes the next number. `labels` are moved onto the version either way.
    """
    ref, name, content, version = request.registry_ref, request.name, request.content, request.version
    registry = owned_registry(session, org_id=org_id, ref=ref, lock=True)
    _require_review_of_labels(registry, request.labels)
    artifact = session.scalar(
        select(RegistryArtifactRow).where(
            RegistryArtifactRow.registry_id == registry.id, RegistryArtifactRow.name == name
        )
    )
    if artifact is None:
        artifact = RegistryArtifactRow(registry_id=registry.id, name=name, version_count=0)
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
        # Metadata read back with its credentials redacted keeps the newest version's values.
        newest = existing if version is None else _existing_version(session, artifact, None)
        existing = _add_version(
            session,
            artifact,
            version=version,
            content=content,
            serialized=serialized,
            content_hash=content_hash,
            metadata=restored(request.metadata, newest.metadata_ if newest else None, field="metadata"),
            commit_message=request.commit_message,
        )
    assert existing is not None
    for label in request.labels:
        _point_label(session, artifact.id, label, existing.id)
    session.flush()
    return PublishedArtifact(
        **version_fields(ref, name, existing),
        content=version_content(existing),
        created=created,
        labels=list(labels_of_versions(session, [existing.id])[existing.id]),
    )


def _existing_version(
    session: Session, artifact: RegistryArtifactRow, version: str | None
) -> RegistryArtifactVersionRow | None:
    """The version a publish is compared with: the named one, or else the newest."""
    condition = (
        RegistryArtifactVersionRow.version == version
        if version is not None
        else RegistryArtifactVersionRow.number == artifact.version_count
    )
    return session.scalar(
        select(RegistryArtifactVersionRow).where(
            RegistryArtifactVersionRow.artifact_id == artifact.id, condition
        )
    )


def _add_version(
    session: Session,
    artifact: RegistryArtifactRow,
    *,
    version: str | None,
    content: str | list[ChatMessage],
    serialized: str,
    content_hash: str,
    metadata: dict[str, Any],
    commit_message: str,
) -> RegistryArtifactVersionRow:
    # The registry row is locked (or, on SQLite, the database is), so the count cannot move under us.
    number = artifact.version_count + 1
    row = RegistryArtifactVersionRow(
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
    session: Session, *, org_id: str, request: MoveLabel, change_request: ChangeRequestRef | None = None
) -> ArtifactVersion:
    """Point the label at the version of the artifact, taking it off any other version. A protected
    label moves only by an approved change request (`change_request`, which the label names)."""
    ref, name = request.registry_ref, request.name
    registry = owned_registry(session, org_id=org_id, ref=ref, lock=True)
    if change_request is None:
        _require_review_of_labels(registry, [request.label])
    artifact = find_artifact(session, registry, ref, name)
    row = find_version(session, artifact, request.version)
    _point_label(session, artifact.id, request.label, row.id, change_request=change_request)
    session.flush()
    return version_record(ref, name, row, labels_of_versions(session, [row.id])[row.id])


def label_move(
    session: Session, *, org_id: str, ref: str, name: str, label: str, version: str, lock: bool = False
) -> tuple[RegistryArtifactVersionRow | None, RegistryArtifactVersionRow]:
    """The version `label` points at now (None if nowhere) and the one it would point at; with
    `lock`, read once the registry is locked, so moves in its labels take turns."""
    registry = owned_registry(session, org_id=org_id, ref=ref, lock=lock)
    artifact = find_artifact(session, registry, ref, name)
    target = find_version(session, artifact, version)
    pointer = session.get(RegistryArtifactLabelRow, (artifact.id, label))
    current = session.get(RegistryArtifactVersionRow, pointer.version_id) if pointer is not None else None
    return current, target


def update_registry(
    session: Session, *, org_id: str, ref: str, protected_labels: list[str] | None
) -> Registry:
    """Set the registry's protected labels (those moved only through approved change requests)."""
    row = owned_registry(session, org_id=org_id, ref=ref, lock=True)
    if protected_labels is not None and protected_labels != row.protected_labels:
        row.protected_labels = protected_labels
        session.flush()
    return registry_record(session, row)


def content_text(row: RegistryArtifactVersionRow) -> str:
    """A version's content as lines a diff compares: the text, or the chat messages one per block."""
    if row.content_type == "text":
        return row.content
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in json.loads(row.content))


def _point_label(
    session: Session,
    artifact_id: str,
    label: str,
    version_id: str,
    *,
    change_request: ChangeRequestRef | None = None,
) -> None:
    """Move the label, naming the change request that moved it (None: moved directly)."""
    row = session.get(RegistryArtifactLabelRow, (artifact_id, label))
    if row is None:
        session.add(
            RegistryArtifactLabelRow(
                artifact_id=artifact_id,
                label=label,
                version_id=version_id,
                change_request=change_request,
            )
        )
    elif row.version_id != version_id:
        row.version_id = version_id
        row.updated_at = utcnow()
        row.change_request = change_request


def _require_review_of_labels(registry: RegistryRow, labels: Iterable[str]) -> None:
    """The rule that sends a label's move to review: a protected label of the registry."""
    protected = sorted(set(labels) & set(registry.protected_labels or ()))
    if protected:
        raise ApprovalRequired(
            rule=f"Label '{protected[0]}' of registry '{registry.org.slug}/{registry.name}' is protected",
            kind="label",
            field="label" if len(protected) == 1 else "labels",
        )


# -- reading ------------------------------------------------------------------------------


def list_artifacts(
    session: Session, *, reader_org_id: str | None, ref: str, limit: int, offset: int
) -> Page[Artifact]:
    """The registry's artifacts by name, each with where its labels point."""
    registry = readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    condition = RegistryArtifactRow.registry_id == registry.id
    total = session.scalar(select(func.count()).select_from(RegistryArtifactRow).where(condition)) or 0
    artifacts = list(
        session.scalars(
            select(RegistryArtifactRow)
            .where(condition)
            .order_by(RegistryArtifactRow.name)
            .limit(limit)
            .offset(offset)
        )
    )
    labels: dict[str, dict[str, str]] = {artifact.id: {} for artifact in artifacts}
    pointers = session.execute(
        select(
            RegistryArtifactLabelRow.artifact_id,
            RegistryArtifactLabelRow.label,
            RegistryArtifactVersionRow.version,
        )
        .join(
            RegistryArtifactVersionRow, RegistryArtifactVersionRow.id == RegistryArtifactLabelRow.version_id
        )
        .where(RegistryArtifactLabelRow.artifact_id.in_(list(labels)))
        .order_by(RegistryArtifactLabelRow.label)
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
    registry = readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    artifact = find_artifact(session, registry, ref, name)
    rows = list(
        session.scalars(
            select(RegistryArtifactVersionRow)
            .where(RegistryArtifactVersionRow.artifact_id == artifact.id)
            .order_by(RegistryArtifactVersionRow.number.desc())
            .limit(limit)
            .offset(offset)
        )
    )
    labels = labels_of_versions(session, [row.id for row in rows])
    items = [version_record(ref, name, row, labels[row.id]) for row in rows]
    return Page[ArtifactVersion](items=items, limit=limit, offset=offset, total=artifact.version_count)


def _version_lookup(*columns: Any) -> Select[Any]:
    """From the organization's slug down to one artifact's versions, joined through unique indexes."""
    return (
        select(*columns, RegistryRow.visibility, RegistryRow.org_id)
        .join(RegistryArtifactRow, RegistryArtifactRow.id == RegistryArtifactVersionRow.artifact_id)
        .join(RegistryRow, RegistryRow.id == RegistryArtifactRow.registry_id)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(
            OrganizationRow.slug == bindparam("org_slug"),
            RegistryRow.name == bindparam("registry_name"),
            RegistryRow.deleted_at.is_(None),
            RegistryArtifactRow.name == bindparam("name"),
        )
    )


# Built once: constructing a statement costs more than running it on the read path.
_BY_VERSION = _version_lookup(RegistryArtifactVersionRow.id).where(
    RegistryArtifactVersionRow.version == bindparam("version")
)
_BY_LABEL = (
    _version_lookup(RegistryArtifactVersionRow.id, RegistryArtifactLabelRow.label)
    .join(
        RegistryArtifactLabelRow,
        (RegistryArtifactLabelRow.artifact_id == RegistryArtifactRow.id)
        & (RegistryArtifactLabelRow.version_id == RegistryArtifactVersionRow.id),
    )
    .where(RegistryArtifactLabelRow.label.in_(bindparam("labels", expanding=True)))
    # Of the labels asked for, production first (the default is production, else latest).
    .order_by(case((RegistryArtifactLabelRow.label == PRODUCTION_LABEL, 0), else_=1))
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

    The hot path of the registry: one indexed query from the organization's slug to the version,
    which also decides access, every time. Only when it finds nothing readable do the slower
    lookups run, to say precisely what is missing.
    """
    org_slug, registry_name = split_ref(ref)
    parameters: dict[str, Any] = {"org_slug": org_slug, "registry_name": registry_name, "name": name}
    if version is not None:
        query, parameters["version"] = _BY_VERSION, version
    else:
        query, parameters["labels"] = _BY_LABEL, [label] if label is not None else list(DEFAULT_LABELS)
    found = session.connection().execute(query, parameters).first()
    if found is None or (found.visibility != "public" and found.org_id != reader_org_id):
        _explain_missing(
            session, reader_org_id=reader_org_id, ref=ref, name=name, version=version, label=label
        )
    answer = _answer(session, found.id, ref, name, label=None if version is not None else found.label)
    return Retrieval(answer=answer, public=found.visibility == "public", by_version=version is not None)


def _answer(session: Session, version_id: str, ref: str, name: str, *, label: str | None) -> TaggedJson:
    """The answer about a version as asked for by this ref and name (and label): the same for as
    long as the version exists, so kept. Who may read it is decided before, on every request."""
    key = (version_id, ref, name, label)
    answer = _kept_versions.get(key)
    if answer is None:
        row = session.get_one(RegistryArtifactVersionRow, version_id)
        answer = tagged_json(
            RetrievedArtifact(**version_fields(ref, name, row), content=version_content(row), label=label)
        )
        if len(answer.body) <= KEPT_BODY_BYTES:
            _kept_versions.put(key, answer)
    return answer


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
    registry = readable_registry(session, reader_org_id=reader_org_id, ref=ref)
    artifact = find_artifact(session, registry, ref, name)
    if version is not None:
        find_version(session, artifact, version)
    if label is not None:
        set_labels = sorted(
            session.scalars(
                select(RegistryArtifactLabelRow.label).where(
                    RegistryArtifactLabelRow.artifact_id == artifact.id
                )
            )
        )
        raise InvalidInput(
            f"Artifact '{name}' has no label '{label}'; its labels are: {', '.join(set_labels)}",
            field="label",
            code="unknown_label",
        )
    # Only a publish committed between the two lookups gets here; the next attempt finds it.
    raise NotFound(f"Artifact '{name}' was being published while it was read; retry", field="name")


@dataclass(frozen=True)
class PromptTrial:
    """A version ready to run: its content rendered and the model to run it on, read in one go so
    that no transaction waits on the model."""

    request: TryPrompt
    version_id: str
    content: str | list[ChatMessage]
    endpoint: ModelEndpoint
    operator_configured: bool


def prompt_trial(
    session: Session, *, org_id: str, request: TryPrompt, settings: Settings, cipher: Cipher
) -> PromptTrial:
    """Find the version, check every `{{variable}}` has a value and resolve the model (400 naming the
    field otherwise)."""
    endpoint, operator_configured = _model_to_try(
        session, org_id=org_id, request=request, settings=settings, cipher=cipher
    )
    registry = owned_registry(session, org_id=org_id, ref=request.registry_ref)
    artifact = find_artifact(session, registry, request.registry_ref, request.name)
    row = find_version(session, artifact, request.version)
    stored = version_content(row)
    content = stored if isinstance(stored, str) else [ChatMessage(**message) for message in stored]
    missing = missing_variables(content, request.variables)
    if missing:
        raise InvalidInput(
            f"No value for the variable '{missing[0]}' of version {row.version}; it needs: "
            + ", ".join(template_variables(content)),
            field=f"variables.{missing[0]}",
        )
    return PromptTrial(
        request=request,
        version_id=row.id,
        content=rendered(content, request.variables),
        endpoint=endpoint,
        operator_configured=operator_configured,
    )


def run_trial(trial: PromptTrial, *, settings: Settings) -> PromptRun:
    """Ask the model; a provider that fails is a ProviderFailed (502, 504 on a timeout)."""
    system, prompt = _split_for_model(trial.content)
    answer = providers.ask_model(
        trial.endpoint,
        operator_configured=trial.operator_configured,
        settings=settings,
        system=system,
        prompt=prompt,
        max_tokens=TRY_MAX_TOKENS,
    )
    return PromptRun(
        artifact_version_id=trial.version_id,
        name=trial.request.name,
        version=trial.request.version,
        rendered=rendered_text(trial.content),
        provider_id=trial.request.provider_id,
        system_model_key=trial.request.system_model_key,
        model=answer.model,
        answer=answer.text,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        total_tokens=answer.total_tokens,
        latency_ms=answer.latency_ms,
    )


def _model_to_try(
    session: Session, *, org_id: str, request: TryPrompt, settings: Settings, cipher: Cipher
) -> tuple[ModelEndpoint, bool]:
    """The model named by providerId (with modelId) or systemModelKey, and whether the operator configured it."""
    if request.provider_id is not None and request.system_model_key is not None:
        raise InvalidInput("Give providerId or systemModelKey, not both", field="systemModelKey")
    if request.system_model_key is not None:
        if request.model_id is not None:
            raise InvalidInput("modelId applies with providerId only", field="modelId")
        return providers.system_model_endpoint(request.system_model_key, settings), True
    if request.provider_id is None:
        raise InvalidInput(
            "Name the model to run on: providerId (one of the organization's provider connections, "
            "GET /providers) or systemModelKey (GET /providers/system)",
            field="providerId",
        )
    endpoint = providers.endpoint_for(
        session, org_id=org_id, provider_id=request.provider_id, model_id=request.model_id, cipher=cipher
    )
    return endpoint, False


def _split_for_model(content: str | list[ChatMessage]) -> tuple[str, str]:
    """The instructions and the question a text or chat prompt puts to the model."""
    if isinstance(content, str):
        return "", content
    instructions = [m.content for m in content if m.role in INSTRUCTING_ROLES]
    conversation = [m for m in content if m.role not in INSTRUCTING_ROLES]
    if not conversation:
        return "", "\n\n".join(instructions)
    question = conversation[0].content if len(conversation) == 1 else rendered_text(conversation)
    return "\n\n".join(instructions), question
