"""`orgdeck channels` and `orgdeck subscriptions`: where notifications go, and of which events."""

from __future__ import annotations

import click

from api.cli.context import json_option, with_client
from api.cli.records import list_options, print_done, print_list, whole
from api.client import OrgdeckClient
from api.events import EVENT_TYPES


@click.group(
    name="channels",
    epilog="""\b
Examples:
  orgdeck channels create deploys webhook --url https://hooks.example.com/orgdeck
  orgdeck channels create oncall email --recipient oncall@example.com
""",
)
def channels() -> None:
    """Notification channels: create, list, update and delete."""


address_options = [
    click.option("--url", metavar="URL", help="A webhook's or Slack's URL."),
    click.option(
        "--recipient", "recipients", metavar="EMAIL", multiple=True, help="An email address (repeatable)."
    ),
]


def with_address(command: click.Command) -> click.Command:
    for option in reversed(address_options):
        command = option(command)
    return command


@channels.command(
    epilog="\b\nExample:\n  orgdeck channels create deploys webhook --url https://hooks.example.com/orgdeck"
)
@click.argument("name")
@click.argument("kind", type=click.Choice(["webhook", "slack", "email"]))
@with_address
@json_option
@with_client
def create(
    client: OrgdeckClient, name: str, kind: str, url: str | None, recipients: tuple[str, ...], as_json: bool
) -> None:
    """Create channel NAME of KIND; a webhook's signing secret is printed only now."""
    channel = client.notifications.create_channel(name, kind, url=url, recipients=list(recipients) or None)
    secret = f"; signing secret {channel.signing_secret}" if channel.signing_secret else ""
    print_done(channel, as_json, f"Created channel {channel.name} ({channel.id}){secret}")


@channels.command(name="list", epilog="\b\nExample:\n  orgdeck channels list --json")
@list_options
@with_client
def list_channels(client: OrgdeckClient, limit: int, cursor: str | None, every: bool, as_json: bool) -> None:
    """The organization's channels."""
    fetch = whole(client.notifications.list_channels)
    print_list(
        fetch, ["id", "name", "kind", "state"], cursor=cursor, limit=limit, every=every, as_json=as_json
    )


@channels.command(epilog="\b\nExample:\n  orgdeck channels update chn_01j... --disable")
@click.argument("channel_id", metavar="ID")
@click.option("--name", metavar="NAME")
@click.option("--enable/--disable", "enabled", default=None, help="Disabling holds its deliveries.")
@with_address
@json_option
@with_client
def update(
    client: OrgdeckClient,
    channel_id: str,
    name: str | None,
    enabled: bool | None,
    url: str | None,
    recipients: tuple[str, ...],
    as_json: bool,
) -> None:
    """Rename, enable, disable or re-address a channel; what is left out stays."""
    channel = client.notifications.update_channel(
        channel_id, name=name, enabled=enabled, url=url, recipients=list(recipients) or None
    )
    print_done(channel, as_json, f"Updated channel {channel.name} ({channel.id})")


@channels.command(epilog="\b\nExample:\n  orgdeck channels delete chn_01j...")
@click.argument("channel_id", metavar="ID")
@json_option
@with_client
def delete(client: OrgdeckClient, channel_id: str, as_json: bool) -> None:
    """Delete a channel and its subscriptions."""
    channel = client.notifications.delete_channel(channel_id)
    print_done(channel, as_json, f"Deleted channel {channel.name} ({channel.id})")


@click.group(
    name="subscriptions",
    epilog="\b\nExamples:\n  orgdeck subscriptions create chn_01j... deployment.failed\n"
    "  orgdeck subscriptions list --channel chn_01j...",
)
def subscriptions() -> None:
    """Which events a channel is sent: subscribe, list and unsubscribe."""


event_argument = click.argument("event_type", metavar="EVENT", type=click.Choice(EVENT_TYPES))


@subscriptions.command(
    name="create", epilog="\b\nExample:\n  orgdeck subscriptions create chn_01j... deployment.failed"
)
@click.argument("channel_id", metavar="CHANNEL")
@event_argument
@json_option
@with_client
def subscribe(client: OrgdeckClient, channel_id: str, event_type: str, as_json: bool) -> None:
    """Send EVENT to CHANNEL (an id)."""
    subscription = client.notifications.subscribe(channel_id, event_type)
    print_done(subscription, as_json, f"Subscribed {channel_id} to {event_type}")


@subscriptions.command(name="list", epilog="\b\nExample:\n  orgdeck subscriptions list --channel chn_01j...")
@click.option("--channel", "channel_id", metavar="ID", help="Only this channel's.")
@list_options
@with_client
def list_subscriptions(
    client: OrgdeckClient, channel_id: str | None, limit: int, cursor: str | None, every: bool, as_json: bool
) -> None:
    """Subscriptions, by channel."""
    fetch = whole(lambda: client.notifications.list_subscriptions(channel_id=channel_id))
    columns = ["id", "channelId", "eventType", "enabled"]
    print_list(fetch, columns, cursor=cursor, limit=limit, every=every, as_json=as_json)


@subscriptions.command(
    name="delete", epilog="\b\nExample:\n  orgdeck subscriptions delete chn_01j... deployment.failed"
)
@click.argument("channel_id", metavar="CHANNEL")
@event_argument
@json_option
@with_client
def unsubscribe(client: OrgdeckClient, channel_id: str, event_type: str, as_json: bool) -> None:
    """Stop sending EVENT to CHANNEL."""
    subscription = client.notifications.unsubscribe(channel_id, event_type)
    print_done(subscription, as_json, f"Unsubscribed {channel_id} from {event_type}")
