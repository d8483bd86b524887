from __future__ import annotations

from typing import Annotated

from fastapi import Header, Query
from starlette.responses import Response

from api.common import DEFAULT_PAGE_SIZE, ErrorBody, Page
from api.registries import (
    Artifact,
    ArtifactName,
    ArtifactVersion,
    CreateRegistry,
    Label,
    MoveLabel,
    PromptRun,
    PublishArtifact,
    PublishedArtifact,
    Registry,
    RegistryAddress,
    RegistryRef,
    RetrievedArtifact,
    TryPrompt,
    UpdateRegistry,
    Version,
)
from service.errors import InvalidInput
from service.http.deps import (
    Admin,
    AppSettings,
    Author,
    LimitQuery,
    OffsetQuery,
    OptionalCaller,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.etags import ONE_YEAR_SECONDS, cache_control, cached_json
from service.http.routing import api_router
from service.registries import service
from service.storage.crypto import cipher_for
from service.trail.recording import record_use

router = api_router("/registries", tags=["Prompt registries"])

# By label an answer may change at any moment: caches may keep it this briefly.
LABEL_MAX_AGE_SECONDS = 60

RegistryRefQuery = Annotated[
    RegistryRef, Query(alias="registryRef", description="`<orgSlug>/<registry name>`.")
]
ArtifactNameQuery = Annotated[ArtifactName, Query(description="The artifact's name.")]


@router.post("", response_model=Registry)
def create_registry(body: CreateRegistry, caller: Author, session: WriteSession) -> Registry:
    """Create a registry; its `registryRef` is `<orgSlug>/<name>`. Names of deleted registries stay taken."""
    return service.create_registry(session, org_id=caller.org_id_for(body.org_slug), request=body)


@router.get("", response_model=Page[Registry])
def list_registries(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    include_deleted: Annotated[bool, Query(alias="includeDeleted")] = False,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Registry]:
    """The organization's registries with their artifact and version counts."""
    return service.list_registries(
        session,
        org_id=caller.org_id_for(org_slug),
        include_deleted=include_deleted,
        limit=limit,
        offset=offset,
    )


@router.delete("", response_model=Registry)
def delete_registry(registry_ref: RegistryRefQuery, caller: Author, session: WriteSession) -> Registry:
    """Soft delete: the registry and its artifacts answer 404 until restored; nothing is erased."""
    return service.delete_registry(session, org_id=caller.org_id, ref=registry_ref)


@router.patch("", response_model=Registry)
def update_registry(body: UpdateRegistry, caller: Admin, session: WriteSession) -> Registry:
    """Set the registry's protected labels: moved only through approved change requests."""
    return service.update_registry(
        session, org_id=caller.org_id, ref=body.registry_ref, protected_labels=body.protected_labels
    )


@router.post("/restore", response_model=Registry)
def restore_registry(body: RegistryAddress, caller: Author, session: WriteSession) -> Registry:
    """Bring back a soft-deleted registry with all its artifacts, versions and labels."""
    return service.restore_registry(session, org_id=caller.org_id, ref=body.registry_ref)


@router.post("/artifacts", response_model=PublishedArtifact)
def publish_artifact(body: PublishArtifact, caller: Author, session: WriteSession) -> PublishedArtifact:
    """Publish an immutable version (the next number, or an explicit semantic version)."""
    return service.publish(session, org_id=caller.org_id, request=body)


@router.get("/artifacts", response_model=Page[Artifact])
def list_artifacts(
    registry_ref: RegistryRefQuery,
    caller: OptionalCaller,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Artifact]:
    """The registry's artifacts with their labels. No key needed for a public registry."""
    return service.list_artifacts(
        session, reader_org_id=_org_id(caller), ref=registry_ref, limit=limit, offset=offset
    )


@router.get("/artifacts/versions", response_model=Page[ArtifactVersion])
def list_artifact_versions(
    registry_ref: RegistryRefQuery,
    name: ArtifactNameQuery,
    caller: OptionalCaller,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[ArtifactVersion]:
    """The artifact's versions, newest first, with their labels. No key needed for a public registry."""
    return service.list_versions(
        session, reader_org_id=_org_id(caller), ref=registry_ref, name=name, limit=limit, offset=offset
    )


@router.get(
    "/artifacts/retrieve",
    response_model=RetrievedArtifact,
    responses={304: {"description": "Not modified: the ETag sent in If-None-Match is still current."}},
)
def retrieve_artifact(
    registry_ref: RegistryRefQuery,
    name: ArtifactNameQuery,
    caller: OptionalCaller,
    session: ReadSession,
    version: Annotated[Version | None, Query(description="A version number (3) or semantic version.")] = None,
    label: Annotated[Label | None, Query(description="A label; default `production`, else `latest`.")] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """One version with its content. By version it is cacheable forever; by label for a minute."""
    if version is not None and label is not None:
        raise InvalidInput("Give a version or a label, not both", field="label")
    retrieval = service.retrieve(
        session, reader_org_id=_org_id(caller), ref=registry_ref, name=name, version=version, label=label
    )
    if retrieval.by_version:
        policy = cache_control(public=retrieval.public, max_age=ONE_YEAR_SECONDS, immutable=True)
    else:
        policy = cache_control(public=retrieval.public, max_age=LABEL_MAX_AGE_SECONDS)
    return cached_json(retrieval.answer, cache_control=policy, if_none_match=if_none_match)


@router.post("/artifacts/labels", response_model=ArtifactVersion)
def move_label(body: MoveLabel, caller: Author, session: WriteSession) -> ArtifactVersion:
    """Point a label at a version, taking it off the version that had it. `latest` moves by itself."""
    return service.move_label(session, org_id=caller.org_id, request=body)


@router.post(
    "/artifacts/try",
    response_model=PromptRun,
    responses={
        502: {"model": ErrorBody, "description": "The model's provider failed; `code` says how"},
        504: {"model": ErrorBody, "description": "The model's provider did not answer in time"},
    },
)
def try_prompt(body: TryPrompt, caller: Author, session: WriteSession, settings: AppSettings) -> PromptRun:
    """Run a version with values for its `{{variables}}` on a provider connection (`providerId`, with
    `modelId` or its default model) or a system model (`systemModelKey`). Nothing is saved; the run is
    an audit event naming the model, never its key. A variable without a value is a 400 naming it."""
    trial = service.prompt_trial(
        session, org_id=caller.org_id, request=body, settings=settings, cipher=cipher_for(settings)
    )
    # Nothing more to read: end the transaction before waiting on a model; the event opens its own.
    session.commit()
    run = service.run_trial(trial, settings=settings)
    record_use(session)
    return run


def _org_id(caller: OptionalCaller) -> str | None:
    return caller.org_id if caller is not None else None
