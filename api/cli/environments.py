"""`orgdeck environments`: where agents are deployed, and their webhook signing keys."""

from __future__ import annotations

import click

from api.cli.context import json_option, resolve_environment, with_client
from api.cli.records import by_offset, list_options, print_done, print_list, print_record
from api.client import OrgdeckClient


@click.group(
    name="environments",
    epilog="""\b
Examples:
  orgdeck environments create production
  orgdeck environments create staging --target webhook --webhook-url https://deploy.example.com/hook
  orgdeck environments signing-key staging --json | jq -r .secret
""",
)
def group() -> None:
    """Environments: create, list, get, update, delete, and their signing keys."""


def target_options(command: click.Command) -> click.Command:
    for option in reversed(
        [
            click.option("--description", metavar="TEXT"),
            click.option("--target", type=click.Choice(["builtin", "webhook"]), help="Where it deploys."),
            click.option("--webhook-url", metavar="URL", help="The receiver of a webhook target."),
        ]
    ):
        command = option(command)
    return command


@group.command(epilog="\b\nExample:\n  orgdeck environments create production --description Live")
@click.argument("name")
@target_options
@json_option
@with_client
def create(
    client: OrgdeckClient,
    name: str,
    description: str | None,
    target: str | None,
    webhook_url: str | None,
    as_json: bool,
) -> None:
    """Create environment NAME (the built-in target unless --target webhook)."""
    environment = client.environments.create(
        name, description=description, target=target, webhook_url=webhook_url
    )
    print_done(environment, as_json, f"Created environment {environment.name} ({environment.id})")


@group.command(name="list", epilog="\b\nExample:\n  orgdeck environments list --target webhook --json")
@click.option("--search", metavar="TEXT", help="Part of the name, any case.")
@click.option("--target", type=click.Choice(["builtin", "webhook"]), help="Only this target.")
@list_options
@with_client
def list_environments(
    client: OrgdeckClient,
    search: str | None,
    target: str | None,
    limit: int,
    cursor: str | None,
    every: bool,
    as_json: bool,
) -> None:
    """The organization's environments, by name."""
    fetch = by_offset(lambda **page: client.environments.list(search=search, target=target, **page))
    columns = ["id", "name", "target", "protected", "secretCount", "signingKeyCreatedAt"]
    print_list(fetch, columns, cursor=cursor, limit=limit, every=every, as_json=as_json)


@group.command(epilog="\b\nExample:\n  orgdeck environments get production")
@click.argument("environment", metavar="ENV")
@json_option
@with_client
def get(client: OrgdeckClient, environment: str, as_json: bool) -> None:
    """One environment (by name or id)."""
    print_record(resolve_environment(client, environment), as_json)


@group.command(
    epilog="\b\nExamples:\n  orgdeck environments update production --protected --required-approvals 2"
    "\n  orgdeck environments update production --promotes-from staging --require-promotion --soak-minutes 60"
)
@click.argument("environment", metavar="ENV")
@click.option("--name", metavar="NAME", help="A new name.")
@target_options
@click.option("--protected/--unprotected", default=None, help="Deploy here only through change requests.")
@click.option("--required-approvals", type=click.IntRange(1), metavar="N", help="Approvals a change needs.")
@click.option(
    "--verification-webhook-url",
    metavar="URL",
    help="Called after each wave of a rollout here ('' clears it).",
)
@click.option("--promotes-from", metavar="ENV", help="The environment this one promotes from ('' clears it).")
@click.option(
    "--require-promotion/--no-require-promotion",
    default=None,
    help="A version must have run in the environment promoted from first.",
)
@click.option("--soak-minutes", type=click.IntRange(0), metavar="N", help="How long it must have run there.")
@click.option("--production/--not-production", default=None, help="Counts as production (lead time).")
@json_option
@with_client
def update(
    client: OrgdeckClient,
    environment: str,
    name: str | None,
    description: str | None,
    target: str | None,
    webhook_url: str | None,
    protected: bool | None,
    required_approvals: int | None,
    verification_webhook_url: str | None,
    promotes_from: str | None,
    require_promotion: bool | None,
    soak_minutes: int | None,
    production: bool | None,
    as_json: bool,
) -> None:
    """Change ENV's settings; what is left out stays."""
    source = resolve_environment(client, promotes_from).id if promotes_from else promotes_from
    updated = client.environments.update(
        resolve_environment(client, environment).id,
        name=name,
        description=description,
        target=target,
        webhook_url=webhook_url,
        protected=protected,
        required_approvals=required_approvals,
        verification_webhook_url=verification_webhook_url,
        promotes_from=source,
        require_promotion=require_promotion,
        soak_minutes=soak_minutes,
        production=production,
    )
    print_done(updated, as_json, f"Updated environment {updated.name} ({updated.id})")


@group.command(epilog="\b\nExample:\n  orgdeck environments delete staging")
@click.argument("environment", metavar="ENV")
@json_option
@with_client
def delete(client: OrgdeckClient, environment: str, as_json: bool) -> None:
    """Delete ENV and every secret scoped to it."""
    deleted = client.environments.delete(resolve_environment(client, environment).id)
    print_done(deleted, as_json, f"Deleted environment {deleted.name} ({deleted.id})")


@group.command(
    name="signing-key",
    epilog="\b\nExample:\n  orgdeck environments signing-key staging --json | jq -r .secret",
)
@click.argument("environment", metavar="ENV")
@json_option
@with_client
def signing_key(client: OrgdeckClient, environment: str, as_json: bool) -> None:
    """Create (or rotate) ENV's webhook signing key; its secret is printed only now."""
    key = client.deployments.create_signing_key(resolve_environment(client, environment).id)
    print_done(key, as_json, key.secret)
