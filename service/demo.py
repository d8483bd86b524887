"""Demo data for the embedded console: a living organization on first run, not empty pages.

Seeding goes through the public client, so it exercises the same paths as any user, and every step
checks what exists first, so running it again changes nothing. Each area adds its own step;
notifications come last, pointed at the receiver the embedded service runs for them.
"""

from __future__ import annotations

from api import OrgdeckClient
from service.agents.demo import seed_agents
from service.deployments.demo import seed_deployments
from service.environments.demo import seed_environments
from service.governance.demo import seed_governance
from service.notifications.demo import seed_notifications
from service.registries.demo import seed_registries
from service.tools.demo import seed_tools

DEMO_KEY_NAMES = ("ci-pipeline", "grafana-exporter")


def seed_api_keys(client: OrgdeckClient) -> None:
    existing = {key.name for key in client.api_keys.list().items}
    for name in DEMO_KEY_NAMES:
        if name not in existing:
            client.api_keys.create(name)


# Environments and tools come before any agents step: agents and deployments refer to them.
STEPS = (
    seed_api_keys,
    seed_environments,
    seed_tools,
    seed_governance,
    seed_registries,
    seed_agents,
    seed_deployments,
)


def seed(client: OrgdeckClient, *, receiver_url: str) -> None:
    for step in STEPS:
        step(client)
    seed_notifications(client, receiver_url=receiver_url)
