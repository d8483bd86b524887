"""Demo environments and secrets: four builtin targets (so the demo works offline) on two promotion
paths (development → staging → production and eu-production), a few secrets."""

from __future__ import annotations

from api import OrgdeckClient

DEMO_ENVIRONMENTS = {
    "development": "Engineers' sandbox: agents deploy here on every merge.",
    "staging": "Release candidates, exercised by the evaluation suite against recorded traffic.",
    "production": "Customer-facing agents in the US region.",
    "eu-production": "Customer-facing agents in the EU region; data stays in Frankfurt.",
}
# Each environment's promotion source; the last ones on the paths are production.
DEMO_PROMOTION_PATHS = {"staging": "development", "production": "staging", "eu-production": "staging"}
DEMO_PRODUCTION = ("production", "eu-production")
# Placeholder values: real secrets never belong in code, demo or not.
ORG_WIDE_SECRETS = {
    "OPENAI_API_KEY": "demo-openai-placeholder",
    "ANTHROPIC_API_KEY": "demo-anthropic-placeholder",
}
PER_ENVIRONMENT_SECRETS = ("ZENDESK_TOKEN", "STRIPE_SECRET_KEY")


def seed_environments(client: OrgdeckClient) -> None:
    existing = {environment.name: environment for environment in client.environments.list(limit=1000).items}
    for name, description in DEMO_ENVIRONMENTS.items():
        if name not in existing:
            existing[name] = client.environments.create(name, description=description)
    for name, source in DEMO_PROMOTION_PATHS.items():
        if existing[name].promotes_from is None:
            client.environments.update(
                existing[name].id, promotes_from=existing[source].id, production=name in DEMO_PRODUCTION
            )
    stored = {(s.name, s.environment_id) for s in client.environments.secrets.list(limit=1000).items}
    wanted = [(name, None, value) for name, value in ORG_WIDE_SECRETS.items()]
    wanted += [
        (name, existing[environment].id, f"demo-{environment}-{name.lower()}-placeholder")
        for environment in DEMO_ENVIRONMENTS
        for name in PER_ENVIRONMENT_SECRETS
    ]
    for name, environment_id, value in wanted:
        if (name, environment_id) not in stored:
            client.environments.secrets.set(name, value, environment_id=environment_id)
