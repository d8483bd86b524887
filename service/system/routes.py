"""The service's own endpoints: its health, and who a key is."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from api.api_keys import ApiKey
from api.system import Caller, CallerMember, Health, Liveness, Readiness, ReadinessChecks
from api.version import VERSION
from service.api_keys.service import touch_key
from service.errors import InvalidInput
from service.http.deps import Viewer, WriteSession
from service.http.health import is_ready
from service.http.routing import api_router

router = api_router("", tags=["Service"])


# Health is polled by every load balancer and monitor: its two possible answers are rendered once.
_HEALTH_BODIES = {
    reachable: Health(
        status="ok" if reachable else "degraded",
        database="ok" if reachable else "unreachable",
        version=VERSION,
    )
    .model_dump_json(by_alias=True)
    .encode()
    for reachable in (True, False)
}


@router.get(
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


_LIVE_BODY = Liveness(status="ok").model_dump_json(by_alias=True).encode()


@router.get("/health/live", response_model=Liveness)
async def health_live() -> Response:
    """The process is up and answering: no I/O, for a liveness probe. Needs no key."""
    return Response(_LIVE_BODY, media_type="application/json")


@router.get(
    "/health/ready",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready; `checks` says which check failed"}},
)
async def health_ready(request: Request) -> Response:
    """Whether to send this process traffic: the database answers, its schema is at this release's
    head, and the worker in this process (if any) finished a round recently. Needs no key."""
    checks = await request.app.state.health.readiness()
    ready = is_ready(checks)
    answer = Readiness(status="ready" if ready else "not ready", checks=ReadinessChecks(**checks))
    return Response(
        answer.model_dump_json(by_alias=True),
        status_code=200 if ready else 503,
        media_type="application/json",
    )


@router.get("/whoami", response_model=Caller)
async def whoami(caller: Viewer) -> Caller:
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
        via=caller.via,
    )


@router.post("/sign-in", response_model=ApiKey)
def sign_in(caller: Viewer, session: WriteSession) -> ApiKey:
    """Record that a person signed in to a console with this key: its last use is now, and the
    sign-in is in the audit trail. Answers the key. A token of the identity provider signs in at
    its first request instead."""
    if caller.via != "key":
        raise InvalidInput(
            "Only an API key signs in here; a token of the identity provider signed in at its first request",
            code="not_an_api_key",
        )
    return ApiKey.model_validate(touch_key(session, key_id=caller.key_id))
