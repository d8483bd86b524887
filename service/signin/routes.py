from __future__ import annotations

from typing import Annotated

from fastapi import Path

from api.common import Page
from api.signin import CreateWorkloadIdentity, SignInSession, UpdateWorkloadIdentity, WorkloadIdentity
from service.http.deps import Admin, AppSettings, OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.routing import api_router
from service.signin import service

router = api_router("/workload-identities", tags=["Sign-in"])
sign_out_router = api_router("", tags=["Sign-in"])

WorkloadIdPath = Annotated[str, Path(alias="workloadId", description="The trusted workload's id.")]


@router.post("", response_model=WorkloadIdentity)
def create_workload_identity(
    body: CreateWorkloadIdentity, caller: Admin, session: WriteSession, settings: AppSettings
) -> WorkloadIdentity:
    """Trust a CI platform's jobs: their own OpenID Connect token, sent as the Bearer, acts with
    `role` when it comes from `issuer` for `audience` and its claims meet every condition."""
    row = service.create_workload(
        session, org_id=caller.org_id_for(body.org_slug), request=body, settings=settings
    )
    return WorkloadIdentity.model_validate(row)


@router.get("", response_model=Page[WorkloadIdentity])
def list_workload_identities(
    org_slug: OrgSlugQuery, caller: Admin, session: ReadSession
) -> Page[WorkloadIdentity]:
    """The organization's trusted workloads by name."""
    rows = service.list_workloads(session, org_id=caller.org_id_for(org_slug))
    return Page[WorkloadIdentity](items=[WorkloadIdentity.model_validate(r) for r in rows], total=len(rows))


@router.get("/{workloadId}", response_model=WorkloadIdentity)
def get_workload_identity(
    workload_id: WorkloadIdPath, org_slug: OrgSlugQuery, caller: Admin, session: ReadSession
) -> WorkloadIdentity:
    """One trusted workload."""
    row = service.get_workload(session, org_id=caller.org_id_for(org_slug), workload_id=workload_id)
    return WorkloadIdentity.model_validate(row)


@router.patch("/{workloadId}", response_model=WorkloadIdentity)
def update_workload_identity(
    workload_id: WorkloadIdPath,
    body: UpdateWorkloadIdentity,
    caller: Admin,
    session: WriteSession,
    settings: AppSettings,
) -> WorkloadIdentity:
    """Change a trusted workload; its jobs' next requests meet the new conditions and role."""
    row = service.update_workload(
        session,
        org_id=caller.org_id_for(body.org_slug),
        workload_id=workload_id,
        request=body,
        settings=settings,
    )
    return WorkloadIdentity.model_validate(row)


@router.delete("/{workloadId}", response_model=WorkloadIdentity)
def delete_workload_identity(
    workload_id: WorkloadIdPath, org_slug: OrgSlugQuery, caller: Admin, session: WriteSession
) -> WorkloadIdentity:
    """Stop trusting a workload: its jobs' tokens are refused from their next request."""
    return service.delete_workload(session, org_id=caller.org_id_for(org_slug), workload_id=workload_id)


@sign_out_router.post("/sign-out", response_model=SignInSession)
def sign_out(caller: Viewer, session: WriteSession) -> SignInSession:
    """End the session of the identity provider's token this request carries (the console's sign-out):
    the token is refused from now on, and the sign-out is on the audit trail."""
    return service.sign_out(session, caller=caller)
