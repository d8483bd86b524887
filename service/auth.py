"""Who is calling: the key presented in the headers and the organization it is scoped to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.errors import Forbidden, Unauthorized


@dataclass(frozen=True)
class Caller:
    org_id: str
    org_slug: str
    org_name: str
    key_id: str
    key_name: str
    # What the key may do now: its own role, lowered to its member's current one.
    role: str
    key_role: str
    member_id: str | None = None
    member_email: str | None = None
    member_name: str | None = None

    def org_id_for(self, org_slug: str) -> str:
        """The organization id when `org_slug` is the caller's own, else 403."""
        if org_slug != self.org_slug:
            raise Forbidden(
                f"This API key belongs to organization '{self.org_slug}' and cannot act on '{org_slug}'",
                field="orgSlug",
            )
        return self.org_id


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: `X-API-Key` wins over `Authorization: Bearer`."""
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    authorization = headers.get("authorization", "").strip()
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("The Authorization header must be 'Bearer <API key>'")
    return token.strip()


MISSING_KEY_MESSAGE = "An API key is required: send it as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'"
