"""Wire models of API keys."""

from __future__ import annotations

from pydantic import Field

from api.common import Name, OrgScoped, Page, Record, Timestamp
from api.members import Role
from api.resource import Resource, body


class CreateApiKey(OrgScoped):
    """A personal key belongs to a member and never does more than the member's current role; a
    service key belongs to no one and has a role of its own. Without `memberId` or `service`, a
    member's key creates a key of its own member, and a service key a service key."""

    name: Name
    role: Role | None = Field(None, description="Default: the owner's role (a service key's: the caller's).")
    member_id: str | None = Field(None, min_length=1, max_length=40, description="The member it belongs to.")
    service: bool = Field(False, description="A service key, owned by no member (admins only).")


class KeyOwner(Record):
    id: str
    email: str
    name: str


class ApiKey(Record):
    """A key as listings show it: never its value, never its hash."""

    id: str
    name: str
    prefix: str
    role: Role
    member: KeyOwner | None = Field(
        None, description="The member a personal key belongs to; none for a service key."
    )
    created_at: Timestamp
    last_used_at: Timestamp | None = None
    revoked_at: Timestamp | None = None


class CreatedApiKey(ApiKey):
    """The answer to a create: the only time the key's value is shown."""

    key: str


class ApiKeysResource(Resource):
    def create(
        self,
        name: str,
        *,
        role: str | None = None,
        member_id: str | None = None,
        service: bool | None = None,
        org_slug: str | None = None,
    ) -> CreatedApiKey:
        payload = body(
            CreateApiKey,
            org_slug=self._org(org_slug),
            name=name,
            role=role,
            member_id=member_id,
            service=service,
        )
        return CreatedApiKey.model_validate(self._client.request("POST", "/api-keys", json=payload))

    def list(self, *, org_slug: str | None = None) -> Page[ApiKey]:
        answer = self._client.request("GET", "/api-keys", params={"orgSlug": self._org(org_slug)})
        return Page[ApiKey].model_validate(answer)

    def revoke(self, key_id: str, *, org_slug: str | None = None) -> ApiKey:
        params = {"orgSlug": self._org(org_slug)}
        return ApiKey.model_validate(self._client.request("DELETE", f"/api-keys/{key_id}", params=params))
