"""`orgdeck`: the command line for pipelines and terminals, built on the client alone.

Installed as the `orgdeck` command by `pip install .`; from a checkout, `python -m api`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from api.cli import (
    access,
    agents,
    audit,
    changes,
    channels,
    deploy,
    environments,
    fleets,
    policies,
    prompts,
    registries,
)
from api.cli.config import DEFAULT_PROFILE, Profile, save_profile
from api.cli.context import Connection, connection_options, json_option, with_client
from api.cli.output import EXIT_FAILURE, EXIT_OK, Failure, err, out, print_json
from api.client import OrgdeckClient
from api.errors import ApiError
from api.version import VERSION

EXAMPLES = """\b
Examples:
  export ORGDECK_API_URL=https://orgdeck.example.com/api ORGDECK_API_KEY=odk_...
  orgdeck prompts publish acme/support triage-system prompts/triage.md --label production
  orgdeck deploy preview production support-bot --exit-code
  orgdeck deploy production support-bot --wait --timeout 600
  orgdeck promote staging production --wait
  orgdeck status --env production --exit-code
  orgdeck audit export --from 2026-01-01 > audit.ndjson

\b
In a pipeline, without a key: the job's own OpenID Connect token (ORGDECK_OIDC_TOKEN, or
GitHub Actions' with `id-token: write`, for the audience ORGDECK_OIDC_AUDIENCE) acts as a
trusted workload of the organization.

\b
Exit codes: 0 done; 1 failed (or: changes, drift, a failed job); 2 usage (or: timed out);
3 authentication; 4 not found. Under --json an error is {"error": {"code", "message"}} on stdout.

\b
Completion (bash; zsh and fish alike):
  eval "$(_ORGDECK_COMPLETE=bash_source orgdeck)"
"""


class _Root(click.Group):
    """Turns every error (the service's, a usage error, the command's own) into its message and an
    exit code: on stderr as text, or under `--json` anywhere on the line as
    `{"error": {"code", "message"}}` on stdout."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ApiError as error:
            raise Failure.of(error) from error

    def main(self, args: Sequence[str] | None = None, *rest: Any, **options: Any) -> Any:
        arguments = list(sys.argv[1:] if args is None else args)
        options.pop("standalone_mode", None)
        try:
            exit_code = super().main(arguments, *rest, standalone_mode=False, **options)
        except click.ClickException as error:
            _show(error, as_json=_asks_for_json(arguments))
            sys.exit(error.exit_code)
        except click.Abort:
            err().print("Aborted.")
            sys.exit(EXIT_FAILURE)
        sys.exit(exit_code if isinstance(exit_code, int) else EXIT_OK)


def _asks_for_json(arguments: list[str]) -> bool:
    """`--json` given as an option (before any `--`, after which everything is an argument)."""
    options = arguments[: arguments.index("--")] if "--" in arguments else arguments
    return "--json" in options


def _show(error: click.ClickException, *, as_json: bool) -> None:
    failure = error if isinstance(error, Failure) else Failure(error.format_message(), error.exit_code)
    if as_json:
        failure.show_json()
    elif isinstance(error, click.UsageError):
        error.show()
    else:
        failure.show()


@click.group(
    cls=_Root,
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(VERSION, "--version", prog_name="orgdeck", message="%(prog)s %(version)s")
@connection_options
@click.pass_context
def cli(ctx: click.Context, api_url: str | None, api_key: str | None, profile: str) -> None:
    """Set up an organization (registries, environments, agents, fleets, channels, keys, members),
    publish prompts, preview and run deployments, review changes, check drift and export the audit
    trail on an Orgdeck service."""
    connection = Connection(api_url=api_url, api_key=api_key, profile=profile)
    ctx.obj = connection
    ctx.call_on_close(connection.close)


@cli.command(
    epilog="""\b
Examples:
  orgdeck login --api-url https://orgdeck.example.com/api
  orgdeck login --profile staging --api-url https://staging.example.com/api --api-key "$KEY"
"""
)
@click.option("--api-url", "login_url", metavar="URL", help="The service's API (asked for when left out).")
@click.option("--api-key", "login_key", metavar="KEY", help="An API key (asked for, hidden, when left out).")
@click.option("--profile", "login_profile", metavar="NAME", help="The profile to write [default: default].")
@click.pass_obj
def login(
    connection: Connection, login_url: str | None, login_key: str | None, login_profile: str | None
) -> None:
    """Check a service URL and key, then keep them in a profile readable only by you (mode 0600)."""
    api_url = login_url or connection.api_url or click.prompt("Service API URL (…/api)")
    api_key = login_key or connection.api_key or click.prompt("API key", hide_input=True)
    with OrgdeckClient(api_url, api_key) as client:
        caller = client.whoami()
    name = login_profile or connection.profile or DEFAULT_PROFILE
    path = save_profile(name, Profile(api_url=api_url.rstrip("/"), api_key=api_key))
    out().print(
        f"Logged in to [bold]{caller.org_slug}[/] at {api_url} with key '{caller.key_name}'; "
        f"profile '{name}' written to {path}.",
        soft_wrap=True,
    )


@cli.command(epilog="\b\nExamples:\n  orgdeck whoami\n  ORG=$(orgdeck whoami --json | jq -r .orgSlug)")
@json_option
@with_client
def whoami(client: OrgdeckClient, as_json: bool) -> None:
    """The organization and key the configured API key stands for."""
    caller = client.whoami()
    if as_json:
        print_json(caller)
        return
    out().print(f"{caller.org_slug} ({caller.org_name}), key '{caller.key_name}' at {client.base_url}")


for command in (
    registries.group,
    prompts.group,
    environments.group,
    agents.group,
    fleets.group,
    deploy.group,
    deploy.promote,
    deploy.jobs,
    deploy.rollout,
    deploy.status,
    changes.group,
    channels.channels,
    channels.subscriptions,
    access.keys,
    access.members,
    policies.group,
    audit.group,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=argv, prog_name="orgdeck")
