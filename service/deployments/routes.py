from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from fastapi.responses import Response
from sqlalchemy.orm import Session

from api.common import DEFAULT_PAGE_SIZE, Day, Page
from api.deployments import (
    AGENT_STATES,
    DEFAULT_JOB_PAGE_SIZE,
    DEFAULT_STATUS_PAGE_SIZE,
    JOB_STATUSES,
    DeploymentJob,
    DeploymentMetrics,
    DeploymentPreview,
    DeploymentRequest,
    DeploymentSettings,
    DeploymentSettingsUpdate,
    FleetDeploymentRequest,
    Heatmap,
    HeatmapBucket,
    HeatmapGroupBy,
    HeatmapMetric,
    HistoryEntry,
    JobTransition,
    MetricsPeriod,
    PromotionRequest,
    PromotionView,
    SigningKey,
    SigningKeyRequest,
    StatusMatrix,
)
from service.deployments import (
    heatmaps,
    history,
    joblist,
    matrix,
    metrics,
    promotion,
    promotion_view,
    rollouts,
    service,
    states,
)
from service.errors import InvalidInput
from service.http.auth import Caller
from service.http.deps import (
    Admin,
    AppSettings,
    EnumListQuery,
    LimitQuery,
    OffsetQuery,
    Operator,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.responses import rendered_json
from service.http.routing import api_router
from service.storage.crypto import cipher_for

router = api_router("", tags=["Deployments"])

StatusQuery = Annotated[list[str], EnumListQuery(JOB_STATUSES, f"Job statuses ({', '.join(JOB_STATUSES)})")]
JobLimitQuery = Annotated[
    float,
    Query(
        ge=1,
        le=1000,
        allow_inf_nan=False,
        multiple_of=1,
        description="Jobs per page, a whole number 1..1000 (`20.0` is accepted).",
    ),
]


@router.post("/agents/deployments/preview", response_model=DeploymentPreview)
def preview_deployment(body: DeploymentRequest, caller: Viewer, session: ReadSession) -> DeploymentPreview:
    """What deploying would change in the environment, agent by agent and field by field, and the
    policies it would break (each with its enforcement: a deny one refuses the deploy). Writes nothing."""
    return _preview(session, caller=caller, request=body)


@router.post("/agents/deployments", response_model=DeploymentJob)
def deploy(body: DeploymentRequest, caller: Operator, session: WriteSession) -> DeploymentJob:
    """Create a pending deployment job; a worker runs it. Follow it at /agents/deployment-jobs/{jobId}."""
    job = service.create_job(
        session,
        org_id=caller.org_id_for(body.org_slug),
        request=body,
        actor=caller.member_email or caller.key_name,
    )
    return DeploymentJob.model_validate(job)


@router.post("/agents/deployments/promote/preview", response_model=DeploymentPreview)
def preview_promotion(body: PromotionRequest, caller: Viewer, session: ReadSession) -> DeploymentPreview:
    """What promoting would change in `to`, as a deployment's preview tells it. Writes nothing."""
    request = promotion.promotion_request(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return _preview(session, caller=caller, request=request)


@router.post("/agents/deployments/promote", response_model=DeploymentJob)
def promote(body: PromotionRequest, caller: Operator, session: WriteSession) -> DeploymentJob:
    """Deploy to `to` exactly what runs complete in `from` (versions, prompt pins and configs), as
    one deployment job: checked, gated and (to a protected environment) reviewed like any."""
    org_id = caller.org_id_for(body.org_slug)
    request = promotion.promotion_request(session, org_id=org_id, request=body)
    job = service.create_job(
        session,
        org_id=org_id,
        request=request,
        actor=caller.member_email or caller.key_name,
        action="promote",
    )
    return DeploymentJob.model_validate(job)


@router.get("/agents/deployments/promotions", response_model=PromotionView)
def deployment_promotions(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    limit: Annotated[
        int, Query(ge=1, le=1000, description="Agents per page (1..1000), each along every path.")
    ] = DEFAULT_STATUS_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> PromotionView:
    """The promotion paths in order, what runs of each agent along them and since when, and per
    environment that promotes from another what waits to be promoted there and what holds it back
    (soak time left, a failed job, the promotion_required reasons, a change request under review)."""
    return promotion_view.promotion_view(
        session, org_id=caller.org_id_for(org_slug), limit=limit, offset=offset
    )


def _preview(session: Session, *, caller: Caller, request: DeploymentRequest) -> DeploymentPreview:
    environment, planned = service.plan_deployment(
        session, org_id=caller.org_id_for(request.org_slug), request=request
    )
    agents = service.agent_previews(planned)
    deployment = {
        "actor": caller.member_email or caller.key_name,
        "viaChangeRequest": False,
        "action": "deploy",
    }
    violations = service.policy_violations(
        session,
        org_id=environment.org_id,
        environment=environment,
        planned=planned,
        deployment=deployment,
        enforce=False,
    )
    has_changes = any(agent.status != "unchanged" for agent in agents)
    return DeploymentPreview(
        environment_id=environment.id,
        has_changes=has_changes,
        agents=agents,
        warnings=service.preview_warnings(session, environment, planned),
        violations=violations,
    )


@router.post("/agents/deployments/signing-key", response_model=SigningKey)
def create_signing_key(
    body: SigningKeyRequest, caller: Operator, session: WriteSession, settings: AppSettings
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
    caller: Operator,
    session: WriteSession,
) -> DeploymentJob:
    """One job deploying every agent of the fleet, each its latest version."""
    job = service.create_fleet_job(
        session,
        org_id=caller.org_id_for(body.org_slug),
        fleet_id=fleet_id,
        request=body,
        actor=caller.member_email or caller.key_name,
    )
    return DeploymentJob.model_validate(job)


@router.get("/agents/deployment-jobs", response_model=Page[DeploymentJob])
def list_jobs(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    environment_id: Annotated[str | None, Query(alias="environmentId", min_length=1, max_length=40)] = None,
    status: StatusQuery = [],  # noqa: B006 (FastAPI copies defaults)
    start: Annotated[
        Day | None, Query(description="Created from this UTC day (YYYY-MM-DD), inclusive.")
    ] = None,
    end: Annotated[
        Day | None, Query(description="Created up to this UTC day (YYYY-MM-DD), inclusive.")
    ] = None,
    limit: JobLimitQuery = float(DEFAULT_JOB_PAGE_SIZE),
    cursor: Annotated[str | None, Query(max_length=40, description="A page's nextCursor.")] = None,
) -> Response:
    """Deployment jobs, newest first; `start` and `end` keep those created on those UTC days (the
    days the heatmaps count them on)."""
    if not limit.is_integer():
        raise InvalidInput(f"limit must be a whole number (got {limit})", field="limit")
    page = joblist.list_jobs(
        session,
        org_id=caller.org_id_for(org_slug),
        environment_id=environment_id,
        statuses=service.parse_statuses(status),
        start=start,
        end=end,
        limit=int(limit),
        cursor=cursor,
    )
    return rendered_json(page)


@router.get("/agents/deployment-jobs/{jobId}", response_model=DeploymentJob)
def get_job(
    job_id: Annotated[str, Path(alias="jobId", description="The job's id (job_…).")],
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
) -> DeploymentJob:
    """One job with each agent's result."""
    job = service.get_job(session, org_id=caller.org_id_for(org_slug), job_id=job_id)
    return DeploymentJob.model_validate(job)


JobIdPath = Annotated[str, Path(alias="jobId", description="The job's id (job_…).")]


@router.post("/agents/deployment-jobs/{jobId}/pause", response_model=DeploymentJob)
def pause_deployment_job(
    job_id: JobIdPath, body: JobTransition, caller: Operator, session: WriteSession
) -> DeploymentJob:
    """Hold a pending or running rollout before its next wave (the wave under way finishes);
    409 for a job without a strategy or in another state."""
    job = rollouts.pause(session, org_id=caller.org_id_for(body.org_slug), job_id=job_id, by=_who(caller))
    return DeploymentJob.model_validate(job)


@router.post("/agents/deployment-jobs/{jobId}/resume", response_model=DeploymentJob)
def resume_deployment_job(
    job_id: JobIdPath, body: JobTransition, caller: Operator, session: WriteSession
) -> DeploymentJob:
    """Continue a paused rollout at once (the rest of a pause between waves is skipped); 409 unless paused."""
    job = rollouts.resume(session, org_id=caller.org_id_for(body.org_slug), job_id=job_id, by=_who(caller))
    return DeploymentJob.model_validate(job)


@router.post("/agents/deployment-jobs/{jobId}/abort", response_model=DeploymentJob)
def abort_deployment_job(
    job_id: JobIdPath, body: JobTransition, caller: Operator, session: WriteSession
) -> DeploymentJob:
    """Start no further wave: the job ends `aborted` (once the wave under way, if any, is on
    record). What it deployed stays: an abort does not roll back. A job without a strategy can be
    aborted only while pending; 409 for a job that has ended."""
    job = rollouts.abort(session, org_id=caller.org_id_for(body.org_slug), job_id=job_id, by=_who(caller))
    return DeploymentJob.model_validate(job)


def _who(caller: Caller) -> str:
    return caller.member_email or caller.key_name


StartQuery = Annotated[
    Day | None,
    Query(description="First UTC day (YYYY-MM-DD), inclusive; default: 90 days before `end`."),
]
EndQuery = Annotated[Day | None, Query(description="Last UTC day (YYYY-MM-DD), inclusive; default: today.")]
EnvironmentFilter = Annotated[
    str | None,
    Query(alias="environmentId", min_length=1, max_length=40, description="Only this environment."),
]


@router.get("/agents/deployments/heatmap", response_model=Heatmap)
def deployment_heatmap(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    group_by: Annotated[HeatmapGroupBy, Query(alias="groupBy")] = "environment",
    bucket: Annotated[HeatmapBucket, Query(description="Columns of groupBy=environment.")] = "day",
    metric: HeatmapMetric = "count",
    start: StartQuery = None,
    end: EndQuery = None,
    environment_id: EnvironmentFilter = None,
) -> Response:
    """Ended jobs (by the UTC day and hour they were created) per environment and day or week, per
    agent and environment, or per weekday and hour; at most 731 days."""
    body = heatmaps.heatmap(
        session,
        org_id=caller.org_id_for(org_slug),
        group_by=group_by,
        bucket=bucket,
        metric=metric,
        start=start,
        end=end,
        environment_id=environment_id,
    )
    return rendered_json(body)


@router.get("/agents/deployments/metrics", response_model=DeploymentMetrics)
def deployment_metrics(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    period: MetricsPeriod = "week",
    start: StartQuery = None,
    end: EndQuery = None,
    environment_id: EnvironmentFilter = None,
) -> Response:
    """Deployment frequency, change failure rate, median duration and time to restore, over the
    range, per period and per environment; at most 731 days."""
    body = metrics.metrics(
        session,
        org_id=caller.org_id_for(org_slug),
        period=period,
        start=start,
        end=end,
        environment_id=environment_id,
    )
    return rendered_json(body)


AgentFilter = Annotated[
    str | None, Query(min_length=1, max_length=100, description="Only this agent (its stableKey).")
]


@router.get("/agents/deployments/history", response_model=Page[HistoryEntry])
def deployment_history(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    agent: AgentFilter = None,
    environment_id: EnvironmentFilter = None,
    status: Annotated[
        list[str], EnumListQuery(history.AGENT_RESULT_STATUSES, "Agent results (pending, complete, error)")
    ] = [],  # noqa: B006 (FastAPI copies defaults)
    start: Annotated[Day | None, Query(description="First UTC day (YYYY-MM-DD), inclusive.")] = None,
    end: Annotated[Day | None, Query(description="Last UTC day (YYYY-MM-DD), inclusive.")] = None,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[HistoryEntry]:
    """Each agent's part in each job: what was deployed where and how it went, newest first."""
    entries, total = history.list_history(
        session,
        org_id=caller.org_id_for(org_slug),
        stable_key=agent,
        environment_id=environment_id,
        statuses=service.parse_statuses(status, allowed=history.AGENT_RESULT_STATUSES),
        start=start,
        end=end,
        limit=limit,
        offset=offset,
    )
    return Page[HistoryEntry](items=entries, limit=limit, offset=offset, total=total)


@router.get("/agents/deployments/status", response_model=StatusMatrix)
def deployment_status(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    environment_id: EnvironmentFilter = None,
    agent: AgentFilter = None,
    state: Annotated[
        list[str],
        EnumListQuery(
            AGENT_STATES,
            "Only pairs in these states (in_sync, drifted, stale, error, not_deployed); agents without "
            "one leave the page",
        ),
    ] = [],  # noqa: B006 (FastAPI copies defaults)
    limit: Annotated[
        int, Query(ge=1, le=1000, description="Agents per page (1..1000), each with every environment.")
    ] = DEFAULT_STATUS_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Response:
    """Each agent in each environment: what runs, what is newest, and the state (counts over the org)."""
    states = service.parse_statuses(state, allowed=AGENT_STATES, field="state")
    page = matrix.MatrixPage(environment_id, agent, tuple(states), limit, offset)
    body = matrix.status_matrix(session, caller.org_id_for(org_slug), page)
    return rendered_json(body)


@router.get("/agents/deployments/settings", response_model=DeploymentSettings)
def deployment_settings(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> DeploymentSettings:
    """The organization's deployment settings (defaults until set)."""
    days = states.get_stale_after_days(session, org_id=caller.org_id_for(org_slug))
    return DeploymentSettings(stale_after_days=days)


@router.put("/agents/deployments/settings", response_model=DeploymentSettings)
def update_deployment_settings(
    body: DeploymentSettingsUpdate, caller: Admin, session: WriteSession
) -> DeploymentSettings:
    """Set the stale threshold; every pair of the organization is re-evaluated under it at once."""
    days = states.update_settings(
        session, org_id=caller.org_id_for(body.org_slug), stale_after_days=body.stale_after_days
    )
    return DeploymentSettings(stale_after_days=days)
