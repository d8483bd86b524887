"""`orgdeck prompts`: publish a prompt file as a new version, and fetch one back."""

from __future__ import annotations

import json
import sys

import click

from api.cli.context import fail, json_option, with_client
from api.cli.output import EXIT_USAGE, out, print_json
from api.client import OrgdeckClient
from api.registries import ChatMessage


@click.group(
    name="prompts",
    epilog="\b\nExamples:\n  orgdeck prompts publish support triage-system prompts/triage.md --label production\n"
    "  orgdeck prompts label support triage-system production 3",
)
def group() -> None:
    """Prompts: publish versions, retrieve them, and move labels."""


def registry_ref(client: OrgdeckClient, registry: str) -> str:
    """`org/registry` as given, or a bare registry name in the key's own organization."""
    return registry if "/" in registry else f"{client.org_slug}/{registry}"


@group.command(
    epilog="""\b
Examples:
  orgdeck prompts publish support triage-system prompts/triage.md --label production
  orgdeck prompts publish acme/support triage-system prompts/triage.md --version 1.4.0 -m "Shorter"
  orgdeck prompts publish support triage-chat chat.json --chat
  render-prompt | orgdeck prompts publish support triage-system -
"""
)
@click.argument("registry")
@click.argument("name")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--version", "version", metavar="V", help="A semantic version (default: the next number).")
@click.option(
    "--label", "labels", metavar="L", multiple=True, help="Move this label onto the version (repeatable)."
)
@click.option("--message", "-m", metavar="M", help="A message saying what changed.")
@click.option("--chat", is_flag=True, help="FILE is a JSON list of {role, content} chat messages.")
@json_option
@with_client
def publish(
    client: OrgdeckClient,
    registry: str,
    name: str,
    file: click.utils.LazyFile,
    version: str | None,
    labels: tuple[str, ...],
    message: str | None,
    chat: bool,
    as_json: bool,
) -> None:
    """Publish FILE (`-` for stdin) as a version of prompt NAME in REGISTRY (`org/name` or `name`).

    Publishing content a version already has changes nothing and says so: safe to run on every build.
    """
    text = file.read()
    content: str | list[ChatMessage] = text
    if chat:
        try:
            content = [ChatMessage.model_validate(item) for item in json.loads(text)]
        except (ValueError, TypeError) as exc:
            fail(f"--chat needs FILE to be a JSON list of {{role, content}} messages: {exc}", EXIT_USAGE)
    published = client.registries.publish(
        registry_ref(client, registry),
        name,
        content,
        version=version,
        labels=list(labels) or None,
        commit_message=message,
    )
    if as_json:
        print_json(published)
        return
    where = f"{published.registry_ref}/{published.name}"
    labelled = f" ({', '.join(published.labels)})" if published.labels else ""
    if published.created:
        out().print(f"Published {where} version {published.version}{labelled}", soft_wrap=True)
    else:
        out().print(
            f"Unchanged: {where} version {published.version} has this content{labelled}", soft_wrap=True
        )


@group.command(
    epilog="""\b
Examples:
  orgdeck prompts get support triage-system > triage.md
  orgdeck prompts get acme/support triage-system --label staging
  orgdeck prompts get support triage-system --version 1.4.0 --json | jq .contentHash
"""
)
@click.argument("registry")
@click.argument("name")
@click.option("--label", metavar="L", help="The version this label points at.")
@click.option("--version", metavar="V", help="This version (a number or a semantic version).")
@json_option
@with_client
def get(
    client: OrgdeckClient, registry: str, name: str, label: str | None, version: str | None, as_json: bool
) -> None:
    """Print a prompt's content exactly as published (chat prompts as a JSON list of messages).

    Without --label or --version: the `production` label if set, else the newest version.
    """
    if label and version:
        fail("Give --label or --version, not both.", EXIT_USAGE)
    artifact = client.registries.retrieve(registry_ref(client, registry), name, version=version, label=label)
    if as_json:
        print_json(artifact)
    elif isinstance(artifact.content, str):
        sys.stdout.write(artifact.content)
    else:
        print_json([message.model_dump(mode="json") for message in artifact.content])


@group.command(
    epilog="""\b
Examples:
  orgdeck prompts label support triage-system production 1.4.0
  orgdeck prompts label acme/support triage-system staging 3 --json
"""
)
@click.argument("registry")
@click.argument("name")
@click.argument("label")
@click.argument("version")
@json_option
@with_client
def label(client: OrgdeckClient, registry: str, name: str, label: str, version: str, as_json: bool) -> None:
    """Move LABEL of prompt NAME onto VERSION (off whichever version had it).

    A protected label moves only through an approved change request: this fails and says so.
    """
    moved = client.registries.move_label(registry_ref(client, registry), name, label, version)
    if as_json:
        print_json(moved)
        return
    out().print(f"{label} → {name} version {moved.version}", soft_wrap=True)
