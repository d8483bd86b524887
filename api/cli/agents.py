"""`orgdeck agents`: list and show agents, and snapshot a draft as a version."""

from __future__ import annotations

import json

import click
from rich.markup import escape

from api.cli.context import json_option, with_client
from api.cli.output import out, print_json, shown, table
from api.client import OrgdeckClient


@click.group(name="agents")
def group() -> None:
    """Agents: the catalogue, and versions of their drafts."""


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
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Agents to list.")
@json_option
@with_client
def list_agents(
    client: OrgdeckClient,
    search: str | None,
    tags: tuple[str, ...],
    provider: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The organization's agents, by key."""
    page = client.agents.list(search=search, tags=list(tags) or None, provider=provider, limit=limit)
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
    if page.total is not None and page.total > len(page.items):
        out().print(f"[dim]{len(page.items)} of {page.total} agents; --limit shows more[/]")


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
