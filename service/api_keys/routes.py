from __future__ import annotations

from fastapi import APIRouter

from api.api_keys import ApiKey, CreateApiKey, CreatedApiKey
from api.common import Page
from service.api_keys import service
from service.deps import CurrentCaller, DbSession, OrgSlugQuery

router = APIRouter(prefix="/api-keys", tags=["API keys"])


@router.post("", response_model=CreatedApiKey)
def create_api_key(body: CreateApiKey, caller: CurrentCaller, session: DbSession) -> CreatedApiKey:
    """Create a key for the organization. Its value is in this answer and nowhere else, ever."""
    issued = service.create_key(session, org_id=caller.org_id_for(body.org_slug), name=body.name)
    return CreatedApiKey.model_validate(
        {**ApiKey.model_validate(issued.record).model_dump(), "key": issued.value}
    )


@router.get("", response_model=Page[ApiKey])
def list_api_keys(org_slug: OrgSlugQuery, caller: CurrentCaller, session: DbSession) -> Page[ApiKey]:
    """The organization's active keys: name, prefix, creation and last use. Never values."""
    keys = service.list_keys(session, org_id=caller.org_id_for(org_slug))
    return Page[ApiKey](items=[ApiKey.model_validate(k) for k in keys], total=len(keys))


@router.delete("/{key_id}", response_model=ApiKey)
def revoke_api_key(key_id: str, org_slug: OrgSlugQuery, caller: CurrentCaller, session: DbSession) -> ApiKey:
    """Revoke a key: immediate and irreversible."""
    record = service.revoke_key(
        session, org_id=caller.org_id_for(org_slug), key_id=key_id, caller_key_id=caller.key_id
    )
    return ApiKey.model_validate(record)
