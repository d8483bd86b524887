from __future__ import annotations

from typing import Annotated

from fastapi import Path

from api.common import DEFAULT_PAGE_SIZE, Page
from api.fleets import CreateFleet, Fleet, FleetDetail, UpdateFleet
from service.fleets import service
from service.http.deps import (
    LimitQuery,
    OffsetQuery,
    Operator,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router

router = api_router("/fleets", tags=["Fleets"])
FleetIdPath = Annotated[str, Path(alias="fleetId", description="The fleet's id (fleet_…).")]
FLEET = "/{fleetId}"


@router.post("", response_model=FleetDetail)
def create_fleet(body: CreateFleet, caller: Operator, session: WriteSession) -> FleetDetail:
    """Create a fleet; agents join it through their `fleetId`."""
    fleet = service.create_fleet(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return FleetDetail.model_validate(fleet)


@router.get("", response_model=Page[Fleet])
def list_fleets(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Fleet]:
    """The organization's fleets by name, each with its environments and agent count."""
    fleets, total = service.list_fleets(
        session, org_id=caller.org_id_for(org_slug), limit=limit, offset=offset
    )
    return Page[Fleet](
        items=[Fleet.model_validate(f) for f in fleets], limit=limit, offset=offset, total=total
    )


@router.get(FLEET, response_model=FleetDetail)
def get_fleet(
    fleet_id: FleetIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> FleetDetail:
    """A fleet with its agents (stableKey, name, provider) and environments."""
    fleet = service.get_fleet(session, org_id=caller.org_id_for(org_slug), fleet_id=fleet_id)
    return FleetDetail.model_validate(fleet)


@router.patch(FLEET, response_model=FleetDetail)
def update_fleet(
    fleet_id: FleetIdPath, body: UpdateFleet, caller: Operator, session: WriteSession
) -> FleetDetail:
    """Rename, describe, or replace the set of environments; only the fields sent change."""
    fleet = service.update_fleet(
        session, org_id=caller.org_id_for(body.org_slug), fleet_id=fleet_id, request=body
    )
    return FleetDetail.model_validate(fleet)


@router.delete(FLEET, response_model=Fleet)
def delete_fleet(
    fleet_id: FleetIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> Fleet:
    """Delete the fleet. Its agents keep existing, outside any fleet."""
    fleet = service.delete_fleet(session, org_id=caller.org_id_for(org_slug), fleet_id=fleet_id)
    return Fleet.model_validate(fleet)
