"""Every router of the service, registered in one place, plus the service's own endpoints."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.system import Caller, Health
from service import __version__
from service.api_keys.routes import router as api_keys_router
from service.deps import CurrentCaller

system_router = APIRouter(tags=["Service"])


@system_router.get("/health", response_model=Health)
async def health(request: Request) -> JSONResponse:
    """Liveness and database reachability. Needs no key and is never rate limited."""
    reachable = await request.app.state.health.database_reachable()
    body = Health(
        status="ok" if reachable else "degraded",
        database="ok" if reachable else "unreachable",
        version=__version__,
    )
    return JSONResponse(body.model_dump(mode="json", by_alias=True), status_code=200 if reachable else 503)


@system_router.get("/whoami", response_model=Caller)
def whoami(caller: CurrentCaller) -> Caller:
    """The organization and key the presented API key stands for."""
    return Caller(
        org_slug=caller.org_slug, org_name=caller.org_name, key_id=caller.key_id, key_name=caller.key_name
    )


api_router = APIRouter(prefix="/api")
for router in (system_router, api_keys_router):
    api_router.include_router(router)
