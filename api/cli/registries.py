"""`orgdeck registries`: the prompt registries prompts are published to."""

from __future__ import annotations

import click

from api.cli.context import json_option, with_client
from api.cli.prompts import registry_ref
from api.cli.records import by_offset, list_options, print_done, print_list
from api.client import OrgdeckClient
from api.registries import Visibility


@click.group(
    name="registries",
    epilog="\b\nExamples:\n  orgdeck registries create support\n  orgdeck registries list --all --json",
)
def group() -> None:
    """Prompt registries: create, list, protect labels, delete and restore."""


@group.command(epilog="\b\nExample:\n  orgdeck registries create support --description 'Support prompts'")
@click.argument("name")
@click.option("--visibility", type=click.Choice(["private", "public"]), default="private", show_default=True)
@click.option("--description", metavar="TEXT")
@json_option
@with_client
def create(
    client: OrgdeckClient, name: str, visibility: Visibility, description: str | None, as_json: bool
) -> None:
    """Create registry NAME in the key's organization."""
    registry = client.registries.create(name, visibility=visibility, description=description)
    print_done(registry, as_json, f"Created registry {registry.registry_ref}")


@group.command(name="list", epilog="\b\nExample:\n  orgdeck registries list --include-deleted")
@click.option("--include-deleted", is_flag=True, help="Deleted registries too (they can be restored).")
@list_options
@with_client
def list_registries(
    client: OrgdeckClient, include_deleted: bool, limit: int, cursor: str | None, every: bool, as_json: bool
) -> None:
    """The organization's registries."""
    fetch = by_offset(lambda **page: client.registries.list(include_deleted=include_deleted, **page))
    columns = ["registryRef", "visibility", "artifactCount", "versionCount", "protectedLabels", "deletedAt"]
    print_list(fetch, columns, cursor=cursor, limit=limit, every=every, as_json=as_json)


@group.command(epilog="\b\nExample:\n  orgdeck registries update support --protected-label production")
@click.argument("registry")
@click.option(
    "--protected-label",
    "labels",
    metavar="L",
    multiple=True,
    help="A label moved only through approved change requests (repeatable; the whole set).",
)
@click.option("--no-protected-labels", is_flag=True, help="Protect no label.")
@json_option
@with_client
def update(
    client: OrgdeckClient, registry: str, labels: tuple[str, ...], no_protected_labels: bool, as_json: bool
) -> None:
    """Set which labels of REGISTRY are protected (admin)."""
    protected = [] if no_protected_labels else list(labels) or None
    updated = client.registries.update(registry_ref(client, registry), protected_labels=protected)
    print_done(updated, as_json, f"Updated registry {updated.registry_ref}")


@group.command(epilog="\b\nExample:\n  orgdeck registries delete support")
@click.argument("registry")
@json_option
@with_client
def delete(client: OrgdeckClient, registry: str, as_json: bool) -> None:
    """Delete REGISTRY (restorable: `registries restore`)."""
    deleted = client.registries.delete(registry_ref(client, registry))
    print_done(deleted, as_json, f"Deleted registry {deleted.registry_ref}")


@group.command(epilog="\b\nExample:\n  orgdeck registries restore support")
@click.argument("registry")
@json_option
@with_client
def restore(client: OrgdeckClient, registry: str, as_json: bool) -> None:
    """Bring a deleted REGISTRY back with its artifacts."""
    restored = client.registries.restore(registry_ref(client, registry))
    print_done(restored, as_json, f"Restored registry {restored.registry_ref}")
