"""Demo data for the embedded console: a living organization on first run, not empty pages.

Seeding goes through the public client, so it exercises the same paths as any user, and every step
checks what exists first, so running it again changes nothing. Each area adds its own step.
"""

from __future__ import annotations

from api import OrgdeckClient

DEMO_KEY_NAMES = ("ci-pipeline", "grafana-exporter")


def seed_api_keys(client: OrgdeckClient) -> None:
    existing = {key.name for key in client.api_keys.list().items}
    for name in DEMO_KEY_NAMES:
        if name not in existing:
            client.api_keys.create(name)


STEPS = (seed_api_keys,)


def seed(client: OrgdeckClient) -> None:
    for step in STEPS:
        step(client)
