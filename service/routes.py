"""Every router of the service, registered in one place, plus the service's own endpoints."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from api.api_keys import ApiKey
from api.system import Caller, CallerMember, Health
from service import __version__
from service.agents.routes import router as agents_router
from service.api_keys.routes import router as api_keys_router
from service.api_keys.service import touch_key
from service.audit.routes import router as audit_router
from service.changes.routes import router as changes_router
from service.deployments.routes import router as deployments_router
from service.deps import DbSession, Viewer
from service.environments.routes import router as environments_router
from service.fleets.routes import router as fleets_router
from service.governance.routes import router as governance_router
from service.members.routes import router as members_router
from service.notifications.routes import router as notifications_router
from service.providers.routes import router as providers_router
from service.registries.routes import router as registries_router
from service.routing import api_router
from service.tools.routes import deployments_router as tool_deployments_router
from service.tools.routes import router as tools_router

system_router = api_router("", tags=["Service"])


# Health is polled by every load balancer and monitor: its two possible answers are rendered once.
_HEALTH_BODIES = {
    reachable: Health(
        status="ok" if reachable else "degraded",
        database="ok" if reachable else "unreachable",
        version=__version__,
    )
    .model_dump_json(by_alias=True)
    .encode()
    for reachable in (True, False)
}


@system_router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "The database is unreachable"}},
)
async def health(request: Request) -> Response:
    """Liveness and database reachability. Needs no key and is never rate limited."""
    reachable = await request.app.state.health.database_reachable()
    return Response(
        _HEALTH_BODIES[reachable], status_code=200 if reachable else 503, media_type="application/json"
    )


@system_router.get("/whoami", response_model=Caller)
def whoami(caller: Viewer, session: DbSession) -> Caller:
    """The organization, key and member the presented API key stands for, and its role now."""
    member = (
        CallerMember(id=caller.member_id, email=caller.member_email, name=caller.member_name)
        if caller.member_id
        else None
    )
    return Caller(
        org_slug=caller.org_slug,
        org_name=caller.org_name,
        key_id=caller.key_id,
        key_name=caller.key_name,
        role=caller.role,
        key_role=caller.key_role,
        member=member,
    )


@system_router.post("/sign-in", response_model=ApiKey)
def sign_in(caller: Viewer, session: DbSession) -> ApiKey:
    """Record that a person signed in to a console with this key: its last use is now, and the
    sign-in is in the audit trail. Answers the key."""
    return ApiKey.model_validate(touch_key(session, key_id=caller.key_id))


# The app serves their routes through one index (service.routing.RouteIndex), in this order:
# tool_deployments_router (/agents/tool-…) must stay before any router with /agents/{stableKey}.
API_ROUTERS = (
    system_router,
    api_keys_router,
    members_router,
    audit_router,
    registries_router,
    environments_router,
    tools_router,
    tool_deployments_router,
    providers_router,
    governance_router,
    deployments_router,
    agents_router,
    fleets_router,
    notifications_router,
    changes_router,
)
