"""Signing in with an identity provider: the trusted workloads (CI jobs that send their own OpenID
Connect token as the Bearer) and signing out."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import Field, StringConstraints, model_validator

from api.common import Name, OrgScoped, Page, Patch, Record, Request, Timestamp
from api.members import Role
from api.resource import Resource, body

ClaimName = Annotated[str, StringConstraints(min_length=1, max_length=100)]
ClaimValue = Annotated[str, StringConstraints(min_length=1, max_length=500)]
Url = Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=500)]
Audience = Annotated[str, StringConstraints(min_length=1, max_length=500)]


class ClaimCondition(Request):
    """One claim of the workload's token and what it must be: exactly `equals`, or `matches`, a
    glob (`*` any run of characters, `?` one, `[abc]` one of them; case-sensitive)."""

    claim: ClaimName
    equals: ClaimValue | None = None
    matches: ClaimValue | None = None

    @model_validator(mode="after")
    def _one_test(self) -> Self:
        if (self.equals is None) == (self.matches is None):
            raise ValueError("a condition takes exactly one of equals and matches")
        return self


Conditions = Annotated[list[ClaimCondition], Field(min_length=1, max_length=20)]


class CreateWorkloadIdentity(OrgScoped):
    """A CI platform's jobs this organization trusts: tokens from `issuer` for `audience` whose
    claims meet every condition act with `role`."""

    name: Name
    issuer: Url = Field(description="The token issuer, e.g. https://token.actions.githubusercontent.com.")
    audience: Audience = Field(description="The audience the job requests its token for.")
    conditions: Conditions = Field(description="Every one must hold (e.g. repository equals acme/agents).")
    role: Role


class UpdateWorkloadIdentity(OrgScoped):
    """Only the fields sent change; the next request of the workload meets the new conditions."""

    name: Patch[Name] = None
    issuer: Patch[Url] = None
    audience: Patch[Audience] = None
    conditions: Patch[Conditions] = None
    role: Patch[Role] = None


class WorkloadIdentity(Record):
    id: str
    name: str
    issuer: str
    audience: str
    conditions: list[ClaimCondition]
    role: Role
    created_at: Timestamp
    updated_at: Timestamp


class SignInSession(Record):
    """One token of a person or a workload, from its first request (its sign-in) on; a token whose
    session has ended (signed out) is refused."""

    id: str
    member_id: str | None = None
    workload_id: str | None = None
    started_at: Timestamp
    expires_at: Timestamp
    ended_at: Timestamp | None = None


class WorkloadIdentitiesResource(Resource):
    def create(
        self,
        name: str,
        issuer: str,
        audience: str,
        conditions: list[dict[str, str]],
        role: str,
        *,
        org_slug: str | None = None,
    ) -> WorkloadIdentity:
        """Trust a CI platform's jobs whose tokens meet every condition (`{claim, equals|matches}`)."""
        payload = body(
            CreateWorkloadIdentity,
            org_slug=self._org(org_slug),
            name=name,
            issuer=issuer,
            audience=audience,
            conditions=[ClaimCondition.model_validate(condition) for condition in conditions],
            role=role,
        )
        return WorkloadIdentity.model_validate(
            self._client.request("POST", "/workload-identities", json=payload)
        )

    def list(self, *, org_slug: str | None = None) -> Page[WorkloadIdentity]:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", "/workload-identities", params=params)
        return Page[WorkloadIdentity].model_validate(answer)

    def get(self, workload_id: str, *, org_slug: str | None = None) -> WorkloadIdentity:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", f"/workload-identities/{workload_id}", params=params)
        return WorkloadIdentity.model_validate(answer)

    def update(self, workload_id: str, *, org_slug: str | None = None, **changes: Any) -> WorkloadIdentity:
        """Change some of name, issuer, audience, conditions, role."""
        if "conditions" in changes:
            changes["conditions"] = [ClaimCondition.model_validate(c) for c in changes["conditions"]]
        payload = body(UpdateWorkloadIdentity, org_slug=self._org(org_slug), **changes)
        answer = self._client.request("PATCH", f"/workload-identities/{workload_id}", json=payload)
        return WorkloadIdentity.model_validate(answer)

    def delete(self, workload_id: str, *, org_slug: str | None = None) -> WorkloadIdentity:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/workload-identities/{workload_id}", params=params)
        return WorkloadIdentity.model_validate(answer)
