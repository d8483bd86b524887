"""`orgdeck agents`: create, list, show, update and archive agents, and their versions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape

from api.cli.context import fail, json_option, with_client
from api.cli.output import EXIT_USAGE, out, print_json, shown, table
from api.cli.records import (
    by_offset,
    collect,
    list_options,
    print_done,
    print_list,
    print_more,
    print_record,
)
from api.client import OrgdeckClient


@click.group(
    name="agents",
    epilog="\b\nExamples:\n  orgdeck agents create support-bot --provider openai\n  orgdeck agents snapshot support-bot",
)
def group() -> None:
    """Agents: create, list, get, update, archive, and their versions."""


@group.command(
    epilog="""\b
Examples:
  orgdeck agents snapshot support-bot
  VERSION=$(orgdeck agents snapshot support-bot --json | jq .version)
"""
)
@click.argument("key")
@json_option
@with_client
def snapshot(client: OrgdeckClient, key: str, as_json: bool) -> None:
    """Freeze agent KEY's draft as its next version (a draft equal to the newest version returns that one)."""
    version = client.agents.snapshot(key)
    if as_json:
        print_json(version)
        return
    out().print(f"{version.stable_key} version {version.version} (sha256 {version.content_hash[:12]})")


@group.command(
    name="list",
    epilog="""\b
Examples:
  orgdeck agents list --tag team:support
  orgdeck agents list --json | jq -r '.items[] | select(.hasUnversionedChanges) | .stableKey'
""",
)
@click.option("--search", metavar="TEXT", help="Part of the key or name, any case.")
@click.option(
    "--tag",
    "tags",
    metavar="TAG",
    multiple=True,
    help="Only agents with this tag (repeatable: all must match).",
)
@click.option("--provider", metavar="NAME", help="Only agents of this provider.")
@list_options
@with_client
def list_agents(
    client: OrgdeckClient,
    search: str | None,
    tags: tuple[str, ...],
    provider: str | None,
    limit: int,
    cursor: str | None,
    every: bool,
    as_json: bool,
) -> None:
    """The organization's agents, by key."""
    fetch = by_offset(
        lambda **page: client.agents.list(search=search, tags=list(tags) or None, provider=provider, **page)
    )
    page = collect(fetch, cursor=cursor, limit=limit, every=every)
    if as_json:
        print_json(page)
        return
    rows = table("KEY", "NAME", "PROVIDER", "VERSION", "DRAFT", "TAGS")
    for agent in page.items:
        draft = "changed" if agent.has_unversioned_changes else "versioned"
        latest = shown(agent.latest_version) if agent.latest_version else "none"
        rows.add_row(
            *map(escape, [agent.stable_key, agent.name, agent.provider, latest, draft, " ".join(agent.tags)])
        )
    out().print(rows)
    print_more(page)


@group.command(epilog="\b\nExample:\n  orgdeck agents show support-bot --json | jq .latestVersion")
@click.argument("key")
@json_option
@with_client
def show(client: OrgdeckClient, key: str, as_json: bool) -> None:
    """One agent: its draft, newest version and catalogue data."""
    agent = client.agents.get(key)
    if as_json:
        print_json(agent)
        return
    facts = table("", "")
    facts.show_header = False
    draft = (
        "differs from the newest version" if agent.has_unversioned_changes else "same as the newest version"
    )
    for label, value in [
        ("key", agent.stable_key),
        ("name", agent.name),
        ("provider", agent.provider),
        ("newest version", shown(agent.latest_version) if agent.latest_version else "none yet"),
        ("draft", draft),
        ("tags", " ".join(agent.tags) or "-"),
        ("fleet", shown(agent.fleet_id)),
        ("updated", agent.updated_at.isoformat(timespec="seconds")),
    ]:
        facts.add_row(f"[bold]{label}[/]", escape(value))
    out().print(facts)
    out().print("[bold]providerConfig[/]")
    out().print(escape(json.dumps(agent.provider_config, indent=2, ensure_ascii=False)))
    if agent.prompt_references:
        out().print("[bold]promptReferences[/]")
        for name, reference in sorted(agent.prompt_references.items()):
            out().print(f"  {escape(name)}: {escape(reference)}")


group.add_command(show, name="get")


def parsed_config(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError as exc:
        fail(f"--config takes a JSON object: {exc}", EXIT_USAGE)
    if not isinstance(config, dict):
        fail('--config takes a JSON object, e.g. \'{"model": "gpt-4o"}\'', EXIT_USAGE)
    return config


def parsed_references(pairs: tuple[str, ...]) -> dict[str, str] | None:
    references = {}
    for pair in pairs:
        name, _, reference = pair.partition("=")
        if not name or not reference:
            fail(
                f"--prompt-ref takes NAME=REF, e.g. system=acme/support/triage@production (got '{pair}')",
                EXIT_USAGE,
            )
        references[name] = reference
    return references or None


def draft_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--name", metavar="NAME", help="A display name."),
        click.option(
            "--tag", "tags", metavar="TAG", multiple=True, help="A tag (repeatable; the whole set)."
        ),
        click.option("--config", metavar="JSON", help="The provider configuration, a JSON object."),
        click.option(
            "--prompt-ref",
            "references",
            metavar="NAME=REF",
            multiple=True,
            help="A prompt the agent uses, e.g. system=acme/support/triage@production (repeatable).",
        ),
        click.option("--fleet", "fleet_id", metavar="ID", help="The fleet it belongs to."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@group.command(
    epilog="""\b
Examples:
  orgdeck agents create support-bot --provider openai --config '{"model": "gpt-4o"}'
  orgdeck agents create triage --provider anthropic --prompt-ref system=acme/support/triage@production
"""
)
@click.argument("key")
@click.option("--provider", required=True, metavar="NAME", help="The provider it runs on, e.g. openai.")
@draft_options
@json_option
@with_client
def create(
    client: OrgdeckClient,
    key: str,
    provider: str,
    name: str | None,
    tags: tuple[str, ...],
    config: str | None,
    references: tuple[str, ...],
    fleet_id: str | None,
    as_json: bool,
) -> None:
    """Create agent KEY (its stable key) with a draft; `agents snapshot KEY` versions it."""
    agent = client.agents.create(
        key,
        provider,
        name=name,
        tags=list(tags) or None,
        provider_config=parsed_config(config),
        prompt_references=parsed_references(references),
        fleet_id=fleet_id,
    )
    print_done(agent, as_json, f"Created agent {agent.stable_key}")


@group.command(
    epilog='\b\nExample:\n  orgdeck agents update support-bot --config \'{"model": "gpt-4o-mini"}\''
)
@click.argument("key")
@click.option("--provider", metavar="NAME", help="Another provider.")
@draft_options
@click.option("--no-fleet", is_flag=True, help="Take it out of its fleet.")
@json_option
@with_client
def update(
    client: OrgdeckClient,
    key: str,
    provider: str | None,
    name: str | None,
    tags: tuple[str, ...],
    config: str | None,
    references: tuple[str, ...],
    fleet_id: str | None,
    no_fleet: bool,
    as_json: bool,
) -> None:
    """Change agent KEY's draft; what is left out stays."""
    agent = client.agents.update(
        key,
        name=name,
        tags=list(tags) or None,
        provider=provider,
        provider_config=parsed_config(config),
        prompt_references=parsed_references(references),
        fleet_id=fleet_id,
        leave_fleet=no_fleet,
    )
    print_done(agent, as_json, f"Updated agent {agent.stable_key}")


@group.command(epilog="\b\nExample:\n  orgdeck agents delete support-bot")
@click.argument("key")
@json_option
@with_client
def delete(client: OrgdeckClient, key: str, as_json: bool) -> None:
    """Archive agent KEY and its versions (its key stays taken)."""
    agent = client.agents.archive(key)
    print_done(agent, as_json, f"Archived agent {agent.stable_key}")


@group.group(
    epilog="\b\nExamples:\n  orgdeck agents versions list support-bot\n  orgdeck agents versions get support-bot 3"
)
def versions() -> None:
    """An agent's versions: create (snapshot the draft), list and get."""


versions.add_command(snapshot, name="create")


@versions.command(name="list", epilog="\b\nExample:\n  orgdeck agents versions list support-bot --all --json")
@click.argument("key")
@list_options
@with_client
def list_versions(
    client: OrgdeckClient, key: str, limit: int, cursor: str | None, every: bool, as_json: bool
) -> None:
    """Agent KEY's versions, newest first."""
    fetch = by_offset(lambda **page: client.agents.versions(key, **page))
    print_list(
        fetch,
        ["version", "contentHash", "createdAt"],
        cursor=cursor,
        limit=limit,
        every=every,
        as_json=as_json,
    )


@versions.command(name="get", epilog="\b\nExample:\n  orgdeck agents versions get support-bot 3 --json")
@click.argument("key")
@click.argument("number", metavar="N", type=click.IntRange(1))
@json_option
@with_client
def get_version(client: OrgdeckClient, key: str, number: int, as_json: bool) -> None:
    """Version N of agent KEY, with its snapshot."""
    print_record(client.agents.version(key, number), as_json)
