from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.common import DEFAULT_PAGE_SIZE, ErrorBody, Page
from api.governance import (
    Category,
    CreatePolicy,
    GeneratePolicyPrompt,
    Policy,
    PolicyDraft,
    PolicyWithVersions,
    Severity,
    UpdatePolicy,
)
from service.governance import service
from service.http.deps import (
    AppSettings,
    Author,
    LimitQuery,
    OffsetQuery,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router
from service.storage.crypto import cipher_for

router = api_router("/governance/policies", tags=["Governance"])
PolicyIdPath = Annotated[str, Path(alias="policyId", description="The policy's id.")]


@router.post(
    "/generate-prompt",
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


@router.post("", response_model=PolicyWithVersions)
def create_policy(body: CreatePolicy, caller: Author, session: WriteSession) -> PolicyWithVersions:
    """Save a policy (typically a reviewed draft) as version 1."""
    policy = service.create_policy(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return PolicyWithVersions.model_validate(policy)


@router.get("", response_model=Page[Policy])
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


@router.get("/{policyId}", response_model=PolicyWithVersions)
def get_policy(
    policy_id: PolicyIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> PolicyWithVersions:
    """A policy with every version of its content, newest first."""
    policy = service.get_policy(session, org_id=caller.org_id_for(org_slug), policy_id=policy_id)
    return PolicyWithVersions.model_validate(policy)


@router.patch("/{policyId}", response_model=PolicyWithVersions)
def update_policy(
    policy_id: PolicyIdPath, body: UpdatePolicy, caller: Author, session: WriteSession
) -> PolicyWithVersions:
    """Change the fields given; a change of content is a new version and the previous one is kept."""
    policy = service.update_policy(
        session, org_id=caller.org_id_for(body.org_slug), policy_id=policy_id, request=body
    )
    return PolicyWithVersions.model_validate(policy)


@router.delete("/{policyId}", response_model=Policy)
def delete_policy(
    policy_id: PolicyIdPath, org_slug: OrgSlugQuery, caller: Author, session: WriteSession
) -> Policy:
    """Delete a policy and its versions."""
    policy = service.delete_policy(session, org_id=caller.org_id_for(org_slug), policy_id=policy_id)
    return Policy.model_validate(policy)
