"""`orgdeck changes`: change requests waiting for review, approved or rejected from a terminal."""

from __future__ import annotations

from typing import get_args

import click

from api.changes import CHANGE_STATUSES, ChangeKind
from api.cli.context import json_option, with_client
from api.cli.records import by_cursor, list_options, print_done, print_list, print_record
from api.client import OrgdeckClient


@click.group(
    name="changes",
    epilog="\b\nExamples:\n  orgdeck changes list --status open\n"
    "  orgdeck changes approve chg_01j... --comment 'Checked the diff'",
)
def group() -> None:
    """Change requests: list, get, approve and reject (with a member's personal key)."""


@group.command(name="list", epilog="\b\nExample:\n  orgdeck changes list --status open --json")
@click.option("--status", type=click.Choice(CHANGE_STATUSES), help="Only requests in this state.")
@click.option("--kind", type=click.Choice(get_args(ChangeKind)))
@list_options
@with_client
def list_changes(
    client: OrgdeckClient,
    status: str | None,
    kind: str | None,
    limit: int,
    cursor: str | None,
    every: bool,
    as_json: bool,
) -> None:
    """Change requests, newest first."""
    fetch = by_cursor(lambda **page: client.change_requests.list(status=status, kind=kind, **page))
    columns = ["id", "kind", "status", "target", "reason"]
    print_list(fetch, columns, cursor=cursor, limit=limit, every=every, as_json=as_json)


@group.command(epilog="\b\nExample:\n  orgdeck changes get chg_01j... --json | jq .preview")
@click.argument("change_id", metavar="ID")
@json_option
@with_client
def get(client: OrgdeckClient, change_id: str, as_json: bool) -> None:
    """One change request with what it would change."""
    print_record(client.change_requests.get(change_id), as_json)


comment_option = click.option("--comment", metavar="TEXT", help="Why, for the record.")


@group.command(epilog="\b\nExample:\n  orgdeck changes approve chg_01j... --comment 'Looks right'")
@click.argument("change_id", metavar="ID")
@comment_option
@json_option
@with_client
def approve(client: OrgdeckClient, change_id: str, comment: str | None, as_json: bool) -> None:
    """Approve a request; the last approval it needs applies it."""
    change = client.change_requests.approve(change_id, comment=comment)
    print_done(change, as_json, f"Approved {change.id}: {change.status}")


@group.command(epilog="\b\nExample:\n  orgdeck changes reject chg_01j... --comment 'Not this week'")
@click.argument("change_id", metavar="ID")
@comment_option
@json_option
@with_client
def reject(client: OrgdeckClient, change_id: str, comment: str | None, as_json: bool) -> None:
    """Reject a request: nothing is applied."""
    change = client.change_requests.reject(change_id, comment=comment)
    print_done(change, as_json, f"Rejected {change.id}: {change.status}")
