from __future__ import annotations

from typing import Annotated

from fastapi import Path

from api.common import Page
from api.providers import (
    CreateProvider,
    Provider,
    ProviderTestRequest,
    ProviderTestResult,
    SystemModel,
    UpdateProvider,
)
from service.http.deps import AppSettings, Operator, OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.routing import api_router
from service.providers import service
from service.storage.crypto import cipher_for

router = api_router("/providers", tags=["LLM providers"])
ProviderIdPath = Annotated[str, Path(alias="providerId", description="The provider's id.")]


@router.post("", response_model=Provider)
def create_provider(
    body: CreateProvider, caller: Operator, session: WriteSession, settings: AppSettings
) -> Provider:
    """Connect a language-model provider. The API key is stored encrypted and never returned."""
    record = service.create_provider(
        session, org_id=caller.org_id_for(body.org_slug), request=body, cipher=cipher_for(settings)
    )
    return Provider.model_validate(record)


@router.get("", response_model=Page[Provider])
def list_providers(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> Page[Provider]:
    """The organization's provider connections, by name."""
    records = service.list_providers(session, org_id=caller.org_id_for(org_slug))
    return Page[Provider](items=[Provider.model_validate(r) for r in records], total=len(records))


@router.get("/system", response_model=Page[SystemModel])
def list_system_models(caller: Viewer, session: ReadSession, settings: AppSettings) -> Page[SystemModel]:
    """The drafting models every organization may use: the built-in drafter (the default) and the
    operator's (ORGDECK_SYSTEM_MODELS)."""
    models = service.system_models(settings)
    return Page[SystemModel](items=models, total=len(models))


@router.get("/{providerId}", response_model=Provider)
def get_provider(
    provider_id: ProviderIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> Provider:
    record = service.get_provider(session, org_id=caller.org_id_for(org_slug), provider_id=provider_id)
    return Provider.model_validate(record)


@router.patch("/{providerId}", response_model=Provider)
def update_provider(
    provider_id: ProviderIdPath,
    body: UpdateProvider,
    caller: Operator,
    session: WriteSession,
    settings: AppSettings,
) -> Provider:
    """Change the fields given; `apiKey` replaces the stored key (null removes it)."""
    record = service.update_provider(
        session,
        org_id=caller.org_id_for(body.org_slug),
        provider_id=provider_id,
        request=body,
        cipher=cipher_for(settings),
    )
    return Provider.model_validate(record)


@router.delete("/{providerId}", response_model=Provider)
def delete_provider(
    provider_id: ProviderIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> Provider:
    record = service.delete_provider(session, org_id=caller.org_id_for(org_slug), provider_id=provider_id)
    return Provider.model_validate(record)


@router.post("/{providerId}/test", response_model=ProviderTestResult)
def test_provider(
    provider_id: ProviderIdPath,
    body: ProviderTestRequest,
    caller: Operator,
    session: ReadSession,
    settings: AppSettings,
) -> ProviderTestResult:
    """Make one real, minimal call. A failure (timeout, refused key, …) is reported in the result."""
    endpoint = service.endpoint_for(
        session,
        org_id=caller.org_id_for(body.org_slug),
        provider_id=provider_id,
        model_id=body.model_id,
        cipher=cipher_for(settings),
    )
    # Nothing more to read: end the read before waiting on the provider.
    session.commit()
    return service.try_connection(endpoint, settings=settings)
