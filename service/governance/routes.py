from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from sqlalchemy.orm import Session

from api.common import DEFAULT_PAGE_SIZE, ErrorBody, Page
from api.governance import (
    Category,
    Compliance,
    CreatePolicy,
    CreatePolicyException,
    GeneratePolicyPrompt,
    Policy,
    PolicyDraft,
    PolicyException,
    PolicyTestResult,
    PolicyWithVersions,
    Severity,
    TestPolicyCheck,
    UpdatePolicy,
)
from service.governance import evaluation, exceptions, service
from service.governance.models import PolicyRow
from service.http.deps import (
    AppSettings,
    Author,
    LimitQuery,
    OffsetQuery,
    Operator,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router
from service.storage.crypto import cipher_for

router = api_router("/governance", tags=["Governance"])
PolicyIdPath = Annotated[str, Path(alias="policyId", description="The policy's id.")]
ExceptionIdPath = Annotated[str, Path(alias="exceptionId", description="The exception's id.")]


@router.post(
    "/policies/generate-prompt",
    response_model=PolicyDraft,
    responses={
        502: {"model": ErrorBody, "description": "The model's provider failed; `code` says how"},
        504: {"model": ErrorBody, "description": "The model's provider did not answer in time"},
    },
)
def generate_policy_prompt(
    body: GeneratePolicyPrompt, caller: Author, session: ReadSession, settings: AppSettings
) -> PolicyDraft:
    """Draft rule text from the author's instructions with the chosen model; nothing is saved.

    `providerSource` system uses `systemModelKey` (default: the built-in offline drafter); custom
    uses the connection `providerId` with `modelId` or its default model. A provider that fails
    answers 502 (504 on a timeout) with a code saying why, e.g. provider_auth_failed.
    """
    target = service.drafting_target(
        session,
        org_id=caller.org_id_for(body.org_slug),
        request=body,
        settings=settings,
        cipher=cipher_for(settings),
    )
    # Nothing more to read: end the read before waiting on a model.
    session.commit()
    return service.draft(target, request=body, settings=settings)


@router.post("/policies/test", response_model=PolicyTestResult)
def test_unsaved_policy(body: TestPolicyCheck, caller: Author, session: ReadSession) -> PolicyTestResult:
    """Run an unsaved check on its examples and on what runs now (within `scope`); nothing is saved.
    A check that does not compile, or answers other than a boolean on an example, is a 400."""
    return service.test_unsaved(session, org_id=caller.org_id_for(body.org_slug), request=body)


@router.post("/policies", response_model=PolicyWithVersions)
def create_policy(body: CreatePolicy, caller: Author, session: WriteSession) -> PolicyWithVersions:
    """Save a policy (typically a reviewed draft) as version 1."""
    policy = service.create_policy(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return _with_results(session, policy)


@router.get("/policies", response_model=Page[Policy])
def list_policies(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    category: Annotated[Category | None, Query()] = None,
    severity: Annotated[Severity | None, Query()] = None,
    search: Annotated[str | None, Query(max_length=200, description="Part of the name, in any case.")] = None,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Policy]:
    """The organization's policies, newest first, optionally of one category and severity or with
    a name holding `search`."""
    policies, total = service.list_policies(
        session,
        org_id=caller.org_id_for(org_slug),
        category=category,
        severity=severity,
        search=search.strip() if search else None,
        limit=limit,
        offset=offset,
    )
    return Page[Policy](
        items=[Policy.model_validate(p) for p in policies], limit=limit, offset=offset, total=total
    )


@router.get("/policies/{policyId}", response_model=PolicyWithVersions)
def get_policy(
    policy_id: PolicyIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> PolicyWithVersions:
    """A policy with every version of its content, newest first, how its examples run and what it
    flags of what runs now."""
    policy = service.get_policy(session, org_id=caller.org_id_for(org_slug), policy_id=policy_id)
    return _with_results(session, policy)


@router.post("/policies/{policyId}/test", response_model=PolicyTestResult)
def test_policy(
    policy_id: PolicyIdPath, org_slug: OrgSlugQuery, caller: Author, session: ReadSession
) -> PolicyTestResult:
    """Run the policy's examples and say what it flags of what runs now; nothing is saved."""
    policy = service.get_policy(session, org_id=caller.org_id_for(org_slug), policy_id=policy_id)
    return service.test_saved(session, policy)


@router.patch("/policies/{policyId}", response_model=PolicyWithVersions)
def update_policy(
    policy_id: PolicyIdPath, body: UpdatePolicy, caller: Author, session: WriteSession
) -> PolicyWithVersions:
    """Change the fields given; a change of content is a new version and the previous one is kept."""
    policy = service.update_policy(
        session, org_id=caller.org_id_for(body.org_slug), policy_id=policy_id, request=body
    )
    return _with_results(session, policy)


@router.delete("/policies/{policyId}", response_model=Policy)
def delete_policy(
    policy_id: PolicyIdPath, org_slug: OrgSlugQuery, caller: Author, session: WriteSession
) -> Policy:
    """Delete a policy and its versions."""
    policy = service.delete_policy(session, org_id=caller.org_id_for(org_slug), policy_id=policy_id)
    return Policy.model_validate(policy)


@router.post("/exceptions", response_model=PolicyException)
def create_exception(body: CreatePolicyException, caller: Operator, session: WriteSession) -> PolicyException:
    """Let deployments through a deny policy for an agent, an environment or both until `expiresAt`
    (at most 90 days ahead)."""
    exception = exceptions.create_exception(
        session,
        org_id=caller.org_id_for(body.org_slug),
        request=body,
        created_by=caller.member_email or caller.key_name,
    )
    return PolicyException.model_validate(exception)


@router.get("/exceptions", response_model=Page[PolicyException])
def list_exceptions(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[PolicyException]:
    """The organization's exceptions, newest first, revoked and expired ones included."""
    rows, total = exceptions.list_exceptions(
        session, org_id=caller.org_id_for(org_slug), limit=limit, offset=offset
    )
    return Page[PolicyException](
        items=[PolicyException.model_validate(row) for row in rows], limit=limit, offset=offset, total=total
    )


@router.delete("/exceptions/{exceptionId}", response_model=PolicyException)
def revoke_exception(
    exception_id: ExceptionIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> PolicyException:
    """Revoke an exception: deployments it let through are refused again from now on."""
    exception = exceptions.revoke_exception(
        session, org_id=caller.org_id_for(org_slug), exception_id=exception_id
    )
    return PolicyException.model_validate(exception)


@router.get("/compliance", response_model=Compliance)
def compliance(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> Compliance:
    """Every policy with a check against what runs now in every environment, computed on read from
    the current deployment records: a matrix of policy by environment and the violations."""
    return evaluation.compliance(session, org_id=caller.org_id_for(org_slug))


def _with_results(session: Session, policy: PolicyRow) -> PolicyWithVersions:
    """A saved policy with how its examples ran and what it flags of what runs now."""
    tested = service.test_saved(session, policy)
    return PolicyWithVersions.model_validate(policy).model_copy(
        update={"example_results": tested.examples, "impact": tested.impact}
    )
