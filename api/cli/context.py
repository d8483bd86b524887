"""What every command shares: the connection to the service, `--json`, and names as people type them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import click

from api.cli.config import DEFAULT_PROFILE, config_path, load_profile
from api.cli.output import EXIT_AUTH, EXIT_USAGE, Failure
from api.cli.pipeline import PipelineTokenError, pipeline_token
from api.client import OrgdeckClient
from api.environments import Environment
from api.errors import NotFound

Command = TypeVar("Command", bound=Callable[..., Any])


@dataclass
class Connection:
    """The service and key a command talks to; the client is made when a command first needs it."""

    api_url: str | None
    api_key: str | None
    profile: str
    _client: OrgdeckClient | None = field(default=None, repr=False)

    def client(self) -> OrgdeckClient:
        if self._client is None:
            api_url, api_key = self._resolve()
            self._client = OrgdeckClient(api_url, api_key)
        return self._client

    def _resolve(self) -> tuple[str, str]:
        profile = load_profile(self.profile)
        api_url = self.api_url or (profile.api_url if profile else None)
        api_key = self.api_key or (profile.api_key if profile else None)
        if not api_url:
            fail(
                "No service to talk to: set ORGDECK_API_URL (e.g. https://orgdeck.example.com/api), pass "
                f"--api-url, or run `orgdeck login` (profile '{self.profile}' in {config_path()}).",
                EXIT_USAGE,
            )
        if not api_key:
            try:
                api_key = pipeline_token()
            except PipelineTokenError as exc:
                fail(str(exc), EXIT_AUTH)
        if not api_key:
            fail(
                "No API key: set ORGDECK_API_KEY, pass --api-key, or run `orgdeck login`; in a pipeline, "
                "set ORGDECK_OIDC_TOKEN to the job's OpenID Connect token (GitHub Actions: grant "
                "`id-token: write`).",
                EXIT_AUTH,
            )
        return api_url, api_key

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def fail(message: str, exit_code: int, code: str | None = None) -> NoReturn:
    """Stop the command: the root prints the message (as JSON under `--json`) and exits so."""
    raise Failure(message, exit_code, code)


def client_of(ctx: click.Context) -> OrgdeckClient:
    return ctx.find_object(Connection).client()  # type: ignore[union-attr]


def with_client(command: Command) -> Command:
    """Pass the connected client to the command as its first argument."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        return command(client_of(click.get_current_context()), *args, **kwargs)

    return run  # type: ignore[return-value]


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the API's JSON answer instead of text (for scripts)."
)


def connection_options(command: Command) -> Command:
    options = [
        click.option(
            "--api-url",
            envvar="ORGDECK_API_URL",
            metavar="URL",
            help="The service's API, e.g. https://orgdeck.example.com/api [env ORGDECK_API_URL].",
        ),
        click.option(
            "--api-key", envvar="ORGDECK_API_KEY", metavar="KEY", help="An API key [env ORGDECK_API_KEY]."
        ),
        click.option(
            "--profile",
            envvar="ORGDECK_PROFILE",
            default=DEFAULT_PROFILE,
            show_default=True,
            help="The profile written by `orgdeck login` to use when no URL or key is given [env ORGDECK_PROFILE].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def resolve_environment(client: OrgdeckClient, text: str) -> Environment:
    """An environment as a person names it: by its name, or by its id (`env_…`)."""
    if text.startswith("env_"):
        try:
            return client.environments.get(text)
        except NotFound:
            pass
    matches = [env for env in client.environments.list(search=text, limit=1000).items if env.name == text]
    if not matches:
        raise NotFound(f"No environment named '{text}' (or with that id) in this organization")
    return matches[0]
