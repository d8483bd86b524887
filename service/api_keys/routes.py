from __future__ import annotations

from typing import Annotated

from fastapi import Path

from api.api_keys import ApiKey, CreateApiKey, CreatedApiKey
from api.common import Page
from service.api_keys import service
from service.http.deps import OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.routing import api_router

router = api_router("/api-keys", tags=["API keys"])
KeyIdPath = Annotated[str, Path(alias="keyId", description="The API key's id.")]


@router.post("", response_model=CreatedApiKey)
def create_api_key(body: CreateApiKey, caller: Viewer, session: WriteSession) -> CreatedApiKey:
    """Create a key: one's own (up to one's role), or as an admin a member's or a service key. Its
    value is in this answer and nowhere else, ever."""
    issued = service.issue_key(session, caller=caller, request=body)
    return CreatedApiKey.model_validate(
        {**ApiKey.model_validate(issued.record).model_dump(), "key": issued.value}
    )


@router.get("", response_model=Page[ApiKey])
def list_api_keys(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> Page[ApiKey]:
    """The organization's active keys: name, prefix, role, owner, creation and last use. Never values."""
    keys = service.list_keys(session, org_id=caller.org_id_for(org_slug))
    return Page[ApiKey](items=keys, total=len(keys))


@router.delete("/{keyId}", response_model=ApiKey)
def revoke_api_key(
    key_id: KeyIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: WriteSession
) -> ApiKey:
    """Revoke a key (one's own member's, or as an admin any): immediate and irreversible."""
    record = service.revoke_key(session, caller=caller, org_slug=org_slug, key_id=key_id)
    return ApiKey.model_validate(record)
