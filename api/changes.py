"""Wire models of reviewed changes (change requests, their reviews, the settings that govern them)
and their client.

A protected action (a deployment to a protected environment, a change to where a protected
environment's deployments go or what they carry, a move of a protected label, a policy change where
the organization requires approval) answers 403 `approval_required` when called directly; it is
opened as a change request with the direct call's body as `payload`, and applied by the last
approval it needs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, SecretStr, StringConstraints, model_validator

from api.approvals import Requester
from api.common import (
    Description,
    JsonObject,
    OrgScoped,
    Page,
    Patch,
    Record,
    Timestamp,
    Trimmed,
    WholeNumber,
)
from api.deployments import EnvironmentId, SigningKeyRequest
from api.environments import EnvironmentFields, SetSecret
from api.governance import CreatePolicyException, UpdatePolicy
from api.members import Role
from api.resource import Resource, body
from api.tools import RecordToolDeployment

ChangeKind = Literal["deployment", "label", "policy", "environment"]
ChangeStatus = Literal["open", "applied", "rejected", "conflict", "expired", "cancelled"]
CHANGE_KINDS: tuple[str, ...] = get_args(ChangeKind)
CHANGE_STATUSES: tuple[str, ...] = get_args(ChangeStatus)
# The role a change needs, to open it and to review it: the role of its direct call.
CHANGE_ROLES = {"deployment": "operator", "label": "author", "policy": "author", "environment": "operator"}
# Where a change request's payload goes when it is applied.
DIRECT_CALLS = {
    "deployment": "POST /agents/deployments",
    "label": "POST /registries/artifacts/labels",
    "policy": "POST /governance/policies, PATCH or DELETE /governance/policies/{policyId}",
    "environment": "PATCH or DELETE /environments/{environmentId}, POST /environments/secrets, "
    "DELETE /environments/secrets/{secretId}, POST /agents/deployments/signing-key, "
    "POST /agents/tool-deployments",
}
MAX_REQUIRED_APPROVALS = 5
DEFAULT_TTL_DAYS = 7
REQUEST_TTL_MAX_DAYS = 365
Reason = Trimmed(2000)


class OpenChangeRequest(OrgScoped):
    kind: ChangeKind
    payload: JsonObject = Field(
        description="The direct call's body: a deployment (as POST /agents/deployments), a label move "
        "(as POST /registries/artifacts/labels), a policy (as POST /governance/policies; with "
        "`policyId` as its PATCH; `policyId` and `delete: true` to delete it), or an environment "
        "change (the direct call's body, or its path's id, with an `action`: update, delete, "
        "setSecret, deleteSecret, signingKey or toolDeployment)."
    )
    reason: Reason = Field(description="Why the change is wanted; reviewers read it.")

    @model_validator(mode="after")
    def _sealed_secret_value(self) -> OpenChangeRequest:
        """A secret's value in an environment change is held as a `SecretStr` from the moment it is
        parsed, so that no dump or repr of the request (the audit trail's record of it) shows it."""
        value = self.payload.get("value")
        if self.kind == "environment" and isinstance(value, str):
            self.payload = {**self.payload, "value": SecretStr(value)}
        return self


class PolicyUpdateChange(UpdatePolicy):
    """A policy change request's payload changing an existing policy."""

    policy_id: str = Field(max_length=40)


class PolicyExceptionChange(CreatePolicyException):
    """A policy change request's payload granting an exception (where policies need approval)."""

    exception: Literal[True]


class PolicyDeleteChange(OrgScoped):
    """A policy change request's payload deleting a policy."""

    policy_id: str = Field(max_length=40)
    delete: Literal[True]


class EnvironmentUpdateChange(EnvironmentFields):
    """An environment change request's payload changing its name, description, target or webhook
    URL, as PATCH /environments/{environmentId} would. Protection rules are not in it: they are an
    admin's direct act."""

    action: Literal["update"]
    environment_id: EnvironmentId


class EnvironmentDeleteChange(OrgScoped):
    """An environment change request's payload deleting it, as DELETE /environments/{environmentId}."""

    action: Literal["delete"]
    environment_id: EnvironmentId


class SecretChange(SetSecret):
    """An environment change request's payload setting a secret, as POST /environments/secrets: of
    one environment, or organization-wide (which every environment without its own carries)."""

    action: Literal["setSecret"]


class SecretDeleteChange(OrgScoped):
    """An environment change request's payload deleting a secret, as DELETE /environments/secrets/{secretId}."""

    action: Literal["deleteSecret"]
    secret_id: str = Field(max_length=40)


class SigningKeyChange(SigningKeyRequest):
    """An environment change request's payload creating or replacing its deployment signing key, as
    POST /agents/deployments/signing-key; the key is made when the request is opened."""

    action: Literal["signingKey"]


class ToolDeploymentChange(RecordToolDeployment):
    """An environment change request's payload creating or updating a tool deployment record, as
    POST /agents/tool-deployments (`environment` is the environment's name)."""

    action: Literal["toolDeployment"]


# Each action of an environment change request, and the shape of its payload.
ENVIRONMENT_CHANGES: dict[str, type[OrgScoped]] = {
    "update": EnvironmentUpdateChange,
    "delete": EnvironmentDeleteChange,
    "setSecret": SecretChange,
    "deleteSecret": SecretDeleteChange,
    "signingKey": SigningKeyChange,
    "toolDeployment": ToolDeploymentChange,
}


class ReviewChangeRequest(OrgScoped):
    comment: Description = ""


class CancelChangeRequest(OrgScoped):
    """Withdraw an open change request (its requester only)."""


class Review(Record):
    member_id: str
    email: str
    key_id: str
    verdict: Literal["approve", "reject"]
    comment: str
    created_at: Timestamp
    counted: bool = Field(
        True,
        description="Whether the approval counts: its member is active and holds the change's role now "
        "(once the request is decided, when it was decided).",
    )
    not_counted_because: str | None = Field(None, description="Why it does not count.")


class ChangeRequest(Record):
    id: str
    kind: ChangeKind
    status: ChangeStatus
    target: str = Field(description="What it changes, in words (e.g. `environment production`).")
    reason: str
    payload: dict[str, Any] = Field(
        description="What will be applied: the direct call's body, a deployment's versions pinned; "
        "a secret's value is left out (the request keeps it encrypted)."
    )
    preview: dict[str, Any] = Field(
        description="What it changes: a deployment's per-agent field changes, a label's content diff, "
        "a policy's text diff, an environment change's field changes (never a secret's value), each "
        "with the state it replaces (`before`)."
    )
    requested_by: Requester
    required_approvals: int = Field(
        description="Approvals that count it needs now: a protected environment's `requiredApprovals`, "
        "else 1 (once the request is decided, as when it was decided)."
    )
    approvals: list[Review]
    rejection: Review | None = None
    result: dict[str, Any] | None = Field(
        None,
        description="What applying produced: `jobId`, `label` and `version`, `policyId` and `version`, "
        "an environment change's `environmentId` (and what it made or deleted).",
    )
    conflict: str | None = Field(None, description="With status conflict: what moved since it was opened.")
    created_at: Timestamp
    expires_at: Timestamp
    decided_at: Timestamp | None = None


class CreatedChangeRequest(ChangeRequest):
    """A change request as opening it answers: once, with what only its requester may see."""

    signing_key: str | None = Field(
        None,
        description="With an environment's signingKey action: the key that applying installs, to "
        "configure the receiver with; shown only in this answer.",
    )


SignInDomains = Annotated[
    list[
        Annotated[
            str,
            StringConstraints(
                pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$", max_length=253
            ),
        ]
    ],
    Field(max_length=50),
]
GroupRoles = Annotated[
    dict[Annotated[str, StringConstraints(min_length=1, max_length=200)], Role], Field(max_length=100)
]


class OrgSettings(Record):
    policy_approval_required: bool = Field(description="New policies and policy changes need approval.")
    change_request_ttl_days: int = Field(description="Days an open change request waits before it expires.")
    sign_in_domains: list[str] = Field(
        default_factory=list,
        description="Email domains whose people become members (with signInDefaultRole) the first "
        "time they sign in with the identity provider; none: only existing members sign in.",
    )
    sign_in_default_role: Role = Field(
        "viewer",
        description="The role of a member the identity provider provisions, unless a group grants one.",
    )
    group_roles: dict[str, Role] = Field(
        default_factory=dict,
        description="The identity provider's groups and the role each grants. When set, a person "
        "signed in with the identity provider acts with the highest role their groups grant (else "
        "signInDefaultRole), decided again at every request.",
    )


class OrgSettingsUpdate(OrgScoped):
    """Only the fields sent change."""

    policy_approval_required: Patch[bool] = None
    change_request_ttl_days: Patch[WholeNumber(1, REQUEST_TTL_MAX_DAYS)] = None
    sign_in_domains: Patch[SignInDomains] = None
    sign_in_default_role: Patch[Role] = None
    group_roles: Patch[GroupRoles] = None


class ChangeRequestsResource(Resource):
    def open(
        self, kind: str, payload: dict[str, Any], reason: str, *, org_slug: str | None = None
    ) -> CreatedChangeRequest:
        """Open a change request for `payload`, the body the direct call would take (for an
        environment change, with its `action`)."""
        answer = self._client.request(
            "POST",
            "/change-requests",
            json=body(
                OpenChangeRequest, org_slug=self._org(org_slug), kind=kind, payload=payload, reason=reason
            ),
        )
        return CreatedChangeRequest.model_validate(answer)

    def list(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        awaiting_my_review: bool = False,
        org_slug: str | None = None,
    ) -> Page[ChangeRequest]:
        """Change requests, newest first; `awaiting_my_review`: the open ones this key's member may
        approve now."""
        params = {
            "orgSlug": self._org(org_slug),
            "status": status,
            "kind": kind,
            "limit": limit,
            "cursor": cursor,
            "awaitingMyReview": "true" if awaiting_my_review else None,
        }
        return Page[ChangeRequest].model_validate(
            self._client.request("GET", "/change-requests", params=params)
        )

    def get(self, change_request_id: str, *, org_slug: str | None = None) -> ChangeRequest:
        answer = self._client.request(
            "GET", f"/change-requests/{change_request_id}", params={"orgSlug": self._org(org_slug)}
        )
        return ChangeRequest.model_validate(answer)

    def approve(
        self, change_request_id: str, *, comment: str | None = None, org_slug: str | None = None
    ) -> ChangeRequest:
        """Approve; the last approval needed applies the change (or ends the request `conflict`)."""
        return self._review(change_request_id, "approve", comment, org_slug)

    def reject(
        self, change_request_id: str, *, comment: str | None = None, org_slug: str | None = None
    ) -> ChangeRequest:
        return self._review(change_request_id, "reject", comment, org_slug)

    def cancel(self, change_request_id: str, *, org_slug: str | None = None) -> ChangeRequest:
        payload = body(CancelChangeRequest, org_slug=self._org(org_slug))
        answer = self._client.request("POST", f"/change-requests/{change_request_id}/cancel", json=payload)
        return ChangeRequest.model_validate(answer)

    def _review(
        self, change_request_id: str, verdict: str, comment: str | None, org_slug: str | None
    ) -> ChangeRequest:
        payload = body(ReviewChangeRequest, org_slug=self._org(org_slug), comment=comment)
        answer = self._client.request("POST", f"/change-requests/{change_request_id}/{verdict}", json=payload)
        return ChangeRequest.model_validate(answer)


class SettingsResource(Resource):
    def get(self, *, org_slug: str | None = None) -> OrgSettings:
        return OrgSettings.model_validate(
            self._client.request("GET", "/settings", params={"orgSlug": self._org(org_slug)})
        )

    def update(
        self,
        *,
        policy_approval_required: bool | None = None,
        change_request_ttl_days: int | None = None,
        org_slug: str | None = None,
    ) -> OrgSettings:
        payload = body(
            OrgSettingsUpdate,
            org_slug=self._org(org_slug),
            policy_approval_required=policy_approval_required,
            change_request_ttl_days=change_request_ttl_days,
        )
        return OrgSettings.model_validate(self._client.request("PUT", "/settings", json=payload))
