"""Wire models of API keys."""

from __future__ import annotations

from api.common import Name, OrgScoped, Page, Record, Timestamp
from api.resource import Resource, body


class CreateApiKey(OrgScoped):
    name: Name


class ApiKey(Record):
    """A key as listings show it: never its value, never its hash."""

    id: str
    name: str
    prefix: str
    created_at: Timestamp
    last_used_at: Timestamp | None = None
    revoked_at: Timestamp | None = None


class CreatedApiKey(ApiKey):
    """The answer to a create: the only time the key's value is shown."""

    key: str


class ApiKeysResource(Resource):
    def create(self, name: str, *, org_slug: str | None = None) -> CreatedApiKey:
        payload = body(CreateApiKey, org_slug=self._org(org_slug), name=name)
        return CreatedApiKey.model_validate(self._client.request("POST", "/api-keys", json=payload))

    def list(self, *, org_slug: str | None = None) -> Page[ApiKey]:
        answer = self._client.request("GET", "/api-keys", params={"orgSlug": self._org(org_slug)})
        return Page[ApiKey].model_validate(answer)

    def revoke(self, key_id: str, *, org_slug: str | None = None) -> ApiKey:
        params = {"orgSlug": self._org(org_slug)}
        return ApiKey.model_validate(self._client.request("DELETE", f"/api-keys/{key_id}", params=params))
