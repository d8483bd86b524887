"""Wire models of an organization's members and the roles they hold."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from api.common import EmailAddress, Name, OrgScoped, Page, Patch, Record, Timestamp
from api.resource import Resource, body

# Fixed and ordered: each role may do everything the ones before it may.
Role = Literal["viewer", "author", "operator", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
ROLE_DESCRIPTIONS = {
    "viewer": "reads everything of the organization, never a secret value",
    "author": "also writes agents' drafts and versions, registries, artifacts and labels, policies",
    "operator": "also environments, secrets, tools, fleets, deployments, channels, providers",
    "admin": "also members, other people's keys, settings and protection rules",
}


def role_at_least(held: str, needed: str) -> bool:
    return ROLES.index(held) >= ROLES.index(needed)


def lower_role(first: str, second: str) -> str:
    return first if ROLES.index(first) <= ROLES.index(second) else second


class CreateMember(OrgScoped):
    email: EmailAddress = Field(description="Unique in the organization, compared without case.")
    name: Name
    role: Role


class UpdateMember(OrgScoped):
    """Only the fields sent change. A lowered role takes effect on the member's keys at once."""

    name: Patch[Name] = None
    role: Patch[Role] = None


class Member(Record):
    id: str
    email: str
    name: str
    role: Role
    active: bool = Field(description="False once deactivated: the member's keys no longer work.")
    created_at: Timestamp
    updated_at: Timestamp
    deactivated_at: Timestamp | None = None


class MembersResource(Resource):
    def create(self, email: str, name: str, role: str, *, org_slug: str | None = None) -> Member:
        payload = body(CreateMember, org_slug=self._org(org_slug), email=email, name=name, role=role)
        return Member.model_validate(self._client.request("POST", "/members", json=payload))

    def list(self, *, include_inactive: bool = False, org_slug: str | None = None) -> Page[Member]:
        params = {"orgSlug": self._org(org_slug), "includeInactive": include_inactive}
        return Page[Member].model_validate(self._client.request("GET", "/members", params=params))

    def get(self, member_id: str, *, org_slug: str | None = None) -> Member:
        params = {"orgSlug": self._org(org_slug)}
        return Member.model_validate(self._client.request("GET", f"/members/{member_id}", params=params))

    def update(
        self, member_id: str, *, name: str | None = None, role: str | None = None, org_slug: str | None = None
    ) -> Member:
        payload = body(UpdateMember, org_slug=self._org(org_slug), name=name, role=role)
        return Member.model_validate(self._client.request("PATCH", f"/members/{member_id}", json=payload))

    def deactivate(self, member_id: str, *, org_slug: str | None = None) -> Member:
        params = {"orgSlug": self._org(org_slug)}
        return Member.model_validate(self._client.request("DELETE", f"/members/{member_id}", params=params))
