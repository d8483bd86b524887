"""Wire models of API keys."""

from __future__ import annotations

from api.common import Name, OrgScoped, Record, Timestamp


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
