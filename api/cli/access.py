"""`orgdeck keys` and `orgdeck members`: who and what may call the service, with which role."""

from __future__ import annotations

import click

from api.cli.context import json_option, with_client
from api.cli.records import list_options, print_done, print_list, print_record, whole
from api.client import OrgdeckClient
from api.members import ROLES

role_choice = click.Choice(ROLES)


@click.group(
    name="keys",
    epilog="\b\nExamples:\n  orgdeck keys create deploy-bot --role operator --json | jq -r .key\n"
    "  orgdeck keys delete key_01j...",
)
def keys() -> None:
    """API keys: create, list and revoke."""


@keys.command(epilog="\b\nExample:\n  orgdeck keys create github-actions --role operator")
@click.argument("name")
@click.option("--role", type=role_choice, help="A service key's role [default: the service's].")
@click.option("--member", "member_id", metavar="ID", help="A personal key of this member (its role).")
@json_option
@with_client
def create(client: OrgdeckClient, name: str, role: str | None, member_id: str | None, as_json: bool) -> None:
    """Create API key NAME; its value is printed only now."""
    created = client.api_keys.create(name, role=role, member_id=member_id)
    print_done(created, as_json, created.key)


@keys.command(name="list", epilog="\b\nExample:\n  orgdeck keys list --json")
@list_options
@with_client
def list_keys(client: OrgdeckClient, limit: int, cursor: str | None, every: bool, as_json: bool) -> None:
    """The organization's keys (never their values)."""
    fetch = whole(client.api_keys.list)
    print_list(
        fetch,
        ["id", "name", "prefix", "role", "createdAt"],
        cursor=cursor,
        limit=limit,
        every=every,
        as_json=as_json,
    )


@keys.command(epilog="\b\nExample:\n  orgdeck keys delete key_01j...")
@click.argument("key_id", metavar="ID")
@json_option
@with_client
def delete(client: OrgdeckClient, key_id: str, as_json: bool) -> None:
    """Revoke a key: it is refused from now on."""
    revoked = client.api_keys.revoke(key_id)
    print_done(revoked, as_json, f"Revoked key {revoked.name} ({revoked.id})")


@click.group(
    name="members",
    epilog="\b\nExamples:\n  orgdeck members create ada@example.com 'Ada Lovelace' --role author\n"
    "  orgdeck members list --include-inactive",
)
def members() -> None:
    """Members: create, list, get, update and deactivate."""


@members.command(
    name="create",
    epilog="\b\nExample:\n  orgdeck members create ada@example.com 'Ada Lovelace' --role author",
)
@click.argument("email")
@click.argument("name")
@click.option("--role", type=role_choice, required=True)
@json_option
@with_client
def create_member(client: OrgdeckClient, email: str, name: str, role: str, as_json: bool) -> None:
    """Add the person at EMAIL, called NAME, with a role."""
    member = client.members.create(email, name, role)
    print_done(member, as_json, f"Created member {member.email} ({member.id})")


@members.command(name="list", epilog="\b\nExample:\n  orgdeck members list --json")
@click.option("--include-inactive", is_flag=True, help="Deactivated members too.")
@list_options
@with_client
def list_members(
    client: OrgdeckClient, include_inactive: bool, limit: int, cursor: str | None, every: bool, as_json: bool
) -> None:
    """The organization's members."""
    fetch = whole(lambda: client.members.list(include_inactive=include_inactive))
    columns = ["id", "email", "name", "role", "deactivatedAt"]
    print_list(fetch, columns, cursor=cursor, limit=limit, every=every, as_json=as_json)


@members.command(epilog="\b\nExample:\n  orgdeck members get mem_01j...")
@click.argument("member_id", metavar="ID")
@json_option
@with_client
def get(client: OrgdeckClient, member_id: str, as_json: bool) -> None:
    """One member."""
    print_record(client.members.get(member_id), as_json)


@members.command(epilog="\b\nExample:\n  orgdeck members update mem_01j... --role operator")
@click.argument("member_id", metavar="ID")
@click.option("--name", metavar="NAME")
@click.option("--role", type=role_choice)
@json_option
@with_client
def update(client: OrgdeckClient, member_id: str, name: str | None, role: str | None, as_json: bool) -> None:
    """Rename a member or change their role."""
    member = client.members.update(member_id, name=name, role=role)
    print_done(member, as_json, f"Updated member {member.email} ({member.id})")


@members.command(name="delete", epilog="\b\nExample:\n  orgdeck members delete mem_01j...")
@click.argument("member_id", metavar="ID")
@json_option
@with_client
def deactivate(client: OrgdeckClient, member_id: str, as_json: bool) -> None:
    """Deactivate a member (and revoke their keys)."""
    member = client.members.deactivate(member_id)
    print_done(member, as_json, f"Deactivated member {member.email} ({member.id})")
