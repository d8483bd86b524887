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

# A few people of every role, and the service keys pipelines and exporters use.
DEMO_MEMBERS = (
    ("sam.viewer@demo.example", "Sam Viewer", "viewer"),
    ("mia.manager@demo.example", "Mia Manager", "viewer"),
    ("ada.author@demo.example", "Ada Author", "author"),
    ("pat.author@demo.example", "Pat Author", "author"),
    ("oli.operator@demo.example", "Oli Operator", "operator"),
    ("raj.operator@demo.example", "Raj Operator", "operator"),
    ("kim.admin@demo.example", "Kim Admin", "admin"),
)
DEMO_SERVICE_KEYS = (("ci-pipeline", "operator"), ("grafana-exporter", "viewer"))


def seed_people(client: OrgdeckClient) -> None:
    members = {member.email: member for member in client.members.list(include_inactive=True).items}
    for email, name, role in DEMO_MEMBERS:
        if email not in members:
            members[email] = client.members.create(email, name, role)
    keys = {key.name for key in client.api_keys.list().items}
    for email, name, _role in DEMO_MEMBERS[::2]:
        key_name = f"{name.split()[0].lower()}-laptop"
        if key_name not in keys:
            client.api_keys.create(key_name, member_id=members[email].id)
    for name, role in DEMO_SERVICE_KEYS:
        if name not in keys:
            client.api_keys.create(name, service=True, role=role)


# Environments and tools come before any agents step: agents and deployments refer to them.
STEPS = (
    seed_people,
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
