from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.common import Page
from api.deployments import (
    DEFAULT_JOB_PAGE_SIZE,
    AgentPreview,
    DeploymentJob,
    DeploymentPreview,
    DeploymentRequest,
    FleetDeploymentRequest,
    SigningKey,
    SigningKeyRequest,
)
from service.crypto import cipher_for
from service.deployments import service
from service.deps import AppSettings, CurrentCaller, DbSession, OrgSlugQuery
from service.errors import InvalidInput

router = APIRouter(tags=["Deployments"])

StatusQuery = Annotated[
    list[str],
    Query(
        description="Job statuses (pending, running, complete, error, partial), repeated "
        "(`status=a&status=b`) or comma-separated (`status=a,b`).",
    ),
]
JobLimitQuery = Annotated[
    float,
    Query(ge=1, le=1000, description="Jobs per page, a whole number 1..1000 (`20.0` is accepted)."),
]


@router.post("/agents/deployments/preview", response_model=DeploymentPreview)
def preview_deployment(
    body: DeploymentRequest, caller: CurrentCaller, session: DbSession
) -> DeploymentPreview:
    """What deploying would change in the environment, agent by agent and field by field. Writes nothing."""
    environment, planned = service.plan_deployment(
        session, org_id=caller.org_id_for(body.org_slug), request=body
    )
    agents = [
        AgentPreview(
            stable_key=plan.agent.stable_key,
            status=plan.status,
            current_version=plan.current.version if plan.current else None,
            target_version=plan.version,
            changes=plan.changes(),
        )
        for plan in planned
    ]
    has_changes = any(agent.status != "unchanged" for agent in agents)
    return DeploymentPreview(environment_id=environment.id, has_changes=has_changes, agents=agents)


@router.post("/agents/deployments", response_model=DeploymentJob)
def deploy(body: DeploymentRequest, caller: CurrentCaller, session: DbSession) -> DeploymentJob:
    """Create a pending deployment job; a worker runs it. Follow it at /agents/deployment-jobs/{jobId}."""
    job = service.create_job(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return DeploymentJob.model_validate(job)


@router.post("/agents/deployments/signing-key", response_model=SigningKey)
def create_signing_key(
    body: SigningKeyRequest, caller: CurrentCaller, session: DbSession, settings: AppSettings
) -> SigningKey:
    """Create or replace the key a webhook environment verifies manifests with; shown only in this answer."""
    key, value = service.create_signing_key(
        session,
        cipher=cipher_for(settings),
        org_id=caller.org_id_for(body.org_slug),
        environment_id=body.environment_id,
    )
    return SigningKey(environment_id=key.environment_id, secret=value, created_at=key.created_at)


@router.post("/fleets/{fleetId}/deploy", response_model=DeploymentJob)
def deploy_fleet(
    fleet_id: Annotated[str, Path(alias="fleetId", description="The fleet's id (fleet_…).")],
    body: FleetDeploymentRequest,
    caller: CurrentCaller,
    session: DbSession,
) -> DeploymentJob:
    """One job deploying every agent of the fleet, each its latest version."""
    job = service.create_fleet_job(
        session,
        org_id=caller.org_id_for(body.org_slug),
        org_slug=body.org_slug,
        fleet_id=fleet_id,
        environment_id=body.environment_id,
    )
    return DeploymentJob.model_validate(job)


@router.get("/agents/deployment-jobs", response_model=Page[DeploymentJob])
def list_jobs(
    org_slug: OrgSlugQuery,
    caller: CurrentCaller,
    session: DbSession,
    environment_id: Annotated[str | None, Query(alias="environmentId", max_length=40)] = None,
    status: StatusQuery = [],  # noqa: B006 (FastAPI copies defaults)
    limit: JobLimitQuery = float(DEFAULT_JOB_PAGE_SIZE),
    cursor: Annotated[str | None, Query(max_length=40, description="A page's nextCursor.")] = None,
) -> Page[DeploymentJob]:
    """Deployment jobs, newest first."""
    if not limit.is_integer():
        raise InvalidInput(f"limit must be a whole number (got {limit})", field="limit")
    jobs, next_cursor = service.list_jobs(
        session,
        org_id=caller.org_id_for(org_slug),
        environment_id=environment_id,
        statuses=service.parse_statuses(status),
        limit=int(limit),
        cursor=cursor,
    )
    items = [DeploymentJob.model_validate(job) for job in jobs]
    return Page[DeploymentJob](items=items, limit=int(limit), next_cursor=next_cursor)


@router.get("/agents/deployment-jobs/{jobId}", response_model=DeploymentJob)
def get_job(
    job_id: Annotated[str, Path(alias="jobId", description="The job's id (job_…).")],
    org_slug: OrgSlugQuery,
    caller: CurrentCaller,
    session: DbSession,
) -> DeploymentJob:
    """One job with each agent's result."""
    job = service.get_job(session, org_id=caller.org_id_for(org_slug), job_id=job_id)
    return DeploymentJob.model_validate(job)
