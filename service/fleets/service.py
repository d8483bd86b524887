"""Fleets: named groups of agents, with the environments they are meant to run in."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from api.common import patched_fields
from api.fleets import CreateFleet, UpdateFleet
from service.agents.models import AgentRow, FleetEnvironmentRow, FleetRow
from service.environments.models import EnvironmentRow
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.storage.db import insert_unless_taken, utcnow


def create_fleet(session: Session, *, org_id: str, request: CreateFleet) -> FleetRow:
    name, environment_ids = request.name, request.environment_ids
    _check_environments(session, org_id=org_id, environment_ids=environment_ids)
    _check_name_free(session, org_id=org_id, name=name)
    fleet = FleetRow(
        org_id=org_id,
        name=name,
        description=request.description,
        environment_links=[FleetEnvironmentRow(environment_id=env_id) for env_id in environment_ids],
    )
    if not insert_unless_taken(session, fleet):
        raise AlreadyExists(f"A fleet named '{name}' already exists", field="name")
    return fleet


def list_fleets(session: Session, *, org_id: str, limit: int, offset: int) -> tuple[list[FleetRow], int]:
    """The org's fleets by name, and how many it has."""
    total = session.scalar(select(func.count(FleetRow.id)).where(FleetRow.org_id == org_id)) or 0
    query = (
        select(FleetRow).where(FleetRow.org_id == org_id).order_by(FleetRow.name).limit(limit).offset(offset)
    )
    return list(session.scalars(query)), total


def get_fleet(session: Session, *, org_id: str, fleet_id: str) -> FleetRow:
    """A fleet of the org; another org's fleet is 404 exactly like an unknown one."""
    fleet = session.scalar(select(FleetRow).where(FleetRow.id == fleet_id, FleetRow.org_id == org_id))
    if fleet is None:
        raise NotFound(f"No fleet '{fleet_id}' in this organization", field="fleetId")
    return fleet


def update_fleet(session: Session, *, org_id: str, fleet_id: str, request: UpdateFleet) -> FleetRow:
    """Apply the fields the request sets; `environmentIds` replaces the whole set."""
    fleet = get_fleet(session, org_id=org_id, fleet_id=fleet_id)
    changes = patched_fields(request)
    if "environment_ids" in changes:
        wanted = changes["environment_ids"]
        _check_environments(session, org_id=org_id, environment_ids=wanted)
        fleet.environment_links = [
            link for link in fleet.environment_links if link.environment_id in wanted
        ] + [
            FleetEnvironmentRow(environment_id=env_id)
            for env_id in wanted
            if env_id not in {link.environment_id for link in fleet.environment_links}
        ]
    if "name" in changes and changes["name"] != fleet.name:
        _check_name_free(session, org_id=org_id, name=changes["name"])
        fleet.name = changes["name"]
    if "description" in changes:
        fleet.description = changes["description"]
    # Environment links live in another table, yet a change of them updates the fleet; a fleet set
    # to what it was updates nothing.
    if session.is_modified(fleet):
        fleet.updated_at = utcnow()
    session.flush()
    return fleet


def delete_fleet(session: Session, *, org_id: str, fleet_id: str) -> FleetRow:
    """Delete the fleet; its agents stay, outside any fleet. Returns the fleet as it was."""
    fleet = get_fleet(session, org_id=org_id, fleet_id=fleet_id)
    session.execute(update(AgentRow).where(AgentRow.fleet_id == fleet.id).values(fleet_id=None))
    session.delete(fleet)
    session.flush()
    return fleet


def _check_environments(session: Session, *, org_id: str, environment_ids: Sequence[str]) -> None:
    if not environment_ids:
        return
    known = set(
        session.scalars(
            select(EnvironmentRow.id).where(
                EnvironmentRow.org_id == org_id, EnvironmentRow.id.in_(environment_ids)
            )
        )
    )
    unknown = [env_id for env_id in environment_ids if env_id not in known]
    if unknown:
        raise InvalidInput(
            f"environmentIds names no environment of this organization: {', '.join(map(repr, unknown))}",
            field="environmentIds",
        )


def _check_name_free(session: Session, *, org_id: str, name: str) -> None:
    if (
        session.scalar(select(FleetRow.id).where(FleetRow.org_id == org_id, FleetRow.name == name))
        is not None
    ):
        raise AlreadyExists(f"A fleet named '{name}' already exists", field="name")
