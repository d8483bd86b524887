"""Wire models of fleets (named groups of agents across environments) and the client's `fleets` operations."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from api.common import Description, Name, OrgScoped, Page, Patch, Record, Timestamp
from api.resource import Resource, body

MAX_FLEET_ENVIRONMENTS = 100

EnvironmentId = Annotated[str, StringConstraints(min_length=1, max_length=40)]


def _unique_in_order(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


EnvironmentIds = Annotated[
    list[EnvironmentId], Field(max_length=MAX_FLEET_ENVIRONMENTS), AfterValidator(_unique_in_order)
]


class CreateFleet(OrgScoped):
    name: Name
    description: Description = ""
    environment_ids: EnvironmentIds = Field(default=[], description="Environments of the organization.")


class UpdateFleet(OrgScoped):
    """Only the fields sent change; `environmentIds` replaces the whole set."""

    name: Patch[Name] = None
    description: Patch[Description] = None
    environment_ids: Patch[EnvironmentIds] = None


class FleetEnvironment(Record):
    id: str
    name: str


class FleetAgent(Record):
    stable_key: str
    name: str
    provider: str


class Fleet(Record):
    id: str
    name: str
    description: str
    environments: list[FleetEnvironment]
    agent_count: int
    created_at: Timestamp
    updated_at: Timestamp


class FleetDetail(Fleet):
    """A fleet with its (active) agents, by stableKey."""

    agents: list[FleetAgent]


class FleetsResource(Resource):
    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        environment_ids: list[str] | None = None,
        org_slug: str | None = None,
    ) -> FleetDetail:
        payload = body(
            CreateFleet,
            org_slug=self._org(org_slug),
            name=name,
            description=description,
            environment_ids=environment_ids,
        )
        return FleetDetail.model_validate(self._client.request("POST", "/fleets", json=payload))

    def list(
        self, *, limit: int | None = None, offset: int | None = None, org_slug: str | None = None
    ) -> Page[Fleet]:
        """The organization's fleets by name."""
        params = {"orgSlug": self._org(org_slug), "limit": limit, "offset": offset}
        return Page[Fleet].model_validate(self._client.request("GET", "/fleets", params=params))

    def get(self, fleet_id: str, *, org_slug: str | None = None) -> FleetDetail:
        params = {"orgSlug": self._org(org_slug)}
        return FleetDetail.model_validate(self._client.request("GET", f"/fleets/{fleet_id}", params=params))

    def update(
        self,
        fleet_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        environment_ids: list[str] | None = None,
        org_slug: str | None = None,
    ) -> FleetDetail:
        payload = body(
            UpdateFleet,
            org_slug=self._org(org_slug),
            name=name,
            description=description,
            environment_ids=environment_ids,
        )
        answer = self._client.request("PATCH", f"/fleets/{fleet_id}", json=payload)
        return FleetDetail.model_validate(answer)

    def delete(self, fleet_id: str, *, org_slug: str | None = None) -> Fleet:
        """Delete the fleet; its agents keep existing, outside any fleet."""
        params = {"orgSlug": self._org(org_slug)}
        return Fleet.model_validate(self._client.request("DELETE", f"/fleets/{fleet_id}", params=params))
