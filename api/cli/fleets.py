"""`orgdeck fleets`: named groups of agents, deployed together."""

from __future__ import annotations

import click

from api.cli.context import json_option, resolve_environment, with_client
from api.cli.records import by_offset, list_options, print_done, print_list, print_record
from api.client import OrgdeckClient


@click.group(
    name="fleets",
    epilog="\b\nExamples:\n  orgdeck fleets create support --env production\n  orgdeck fleets list",
)
def group() -> None:
    """Fleets: create, list, get, update and delete."""


def environment_ids(client: OrgdeckClient, environments: tuple[str, ...]) -> list[str] | None:
    return [resolve_environment(client, name).id for name in environments] or None


environment_option = click.option(
    "--env",
    "environments",
    metavar="ENV",
    multiple=True,
    help="An environment it deploys to, by name or id (repeatable; the whole set).",
)


@group.command(epilog="\b\nExample:\n  orgdeck fleets create support --env production --env staging")
@click.argument("name")
@click.option("--description", metavar="TEXT")
@environment_option
@json_option
@with_client
def create(
    client: OrgdeckClient, name: str, description: str | None, environments: tuple[str, ...], as_json: bool
) -> None:
    """Create fleet NAME."""
    fleet = client.fleets.create(
        name, description=description, environment_ids=environment_ids(client, environments)
    )
    print_done(fleet, as_json, f"Created fleet {fleet.name} ({fleet.id})")


@group.command(name="list", epilog="\b\nExample:\n  orgdeck fleets list --all --json")
@list_options
@with_client
def list_fleets(client: OrgdeckClient, limit: int, cursor: str | None, every: bool, as_json: bool) -> None:
    """The organization's fleets, by name."""
    fetch = by_offset(lambda **page: client.fleets.list(**page))
    print_list(
        fetch,
        ["id", "name", "agentCount", "description"],
        cursor=cursor,
        limit=limit,
        every=every,
        as_json=as_json,
    )


@group.command(epilog="\b\nExample:\n  orgdeck fleets get flt_01j...")
@click.argument("fleet_id", metavar="ID")
@json_option
@with_client
def get(client: OrgdeckClient, fleet_id: str, as_json: bool) -> None:
    """One fleet with its agents."""
    print_record(client.fleets.get(fleet_id), as_json)


@group.command(epilog="\b\nExample:\n  orgdeck fleets update flt_01j... --name support-eu")
@click.argument("fleet_id", metavar="ID")
@click.option("--name", metavar="NAME")
@click.option("--description", metavar="TEXT")
@environment_option
@json_option
@with_client
def update(
    client: OrgdeckClient,
    fleet_id: str,
    name: str | None,
    description: str | None,
    environments: tuple[str, ...],
    as_json: bool,
) -> None:
    """Change a fleet; what is left out stays."""
    fleet = client.fleets.update(
        fleet_id, name=name, description=description, environment_ids=environment_ids(client, environments)
    )
    print_done(fleet, as_json, f"Updated fleet {fleet.name} ({fleet.id})")


@group.command(epilog="\b\nExample:\n  orgdeck fleets delete flt_01j...")
@click.argument("fleet_id", metavar="ID")
@json_option
@with_client
def delete(client: OrgdeckClient, fleet_id: str, as_json: bool) -> None:
    """Delete a fleet; its agents stay, outside any fleet."""
    fleet = client.fleets.delete(fleet_id)
    print_done(fleet, as_json, f"Deleted fleet {fleet.name} ({fleet.id})")
