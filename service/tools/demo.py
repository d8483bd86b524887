"""Demo tools with input schemas, and records of their deployments across the demo environments."""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from api import OrgdeckClient


def _object(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}
DEMO_TOOLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "zendesk.search_tickets": (
        "Search Zendesk tickets",
        "Full-text search over support tickets, newest first.",
        _object(
            ["query"], query=STRING, status={"enum": ["open", "pending", "solved"]}, limit={"type": "integer"}
        ),
    ),
    "stripe.refund": (
        "Refund a Stripe charge",
        "Refunds all or part of a charge; amounts in the smallest currency unit.",
        _object(["charge_id"], charge_id=STRING, amount={"type": "integer", "minimum": 1}, reason=STRING),
    ),
    "kb.search": (
        "Search the knowledge base",
        "Semantic search over help-centre articles.",
        _object(["query"], query=STRING, locale=STRING),
    ),
    "github.create_review": (
        "Create a GitHub review",
        "Posts a pull-request review with inline comments.",
        _object(
            ["repository", "pull_number", "body"],
            repository=STRING,
            pull_number={"type": "integer"},
            body=STRING,
        ),
    ),
    "pagerduty.get_incident": (
        "Get a PagerDuty incident",
        "Reads an incident with its timeline and responders.",
        _object(["incident_id"], incident_id=STRING),
    ),
    "slack.post_message": (
        "Post to Slack",
        "Posts a message to a channel the bot is in.",
        _object(["channel", "text"], channel=STRING, text=STRING),
    ),
}
# The versions each environment went through, oldest first: production trails staging.
DEMO_ROLLOUTS: dict[str, dict[str, list[str]]] = {
    "zendesk.search_tickets": {
        "development": ["1.2.0", "1.3.0", "1.4.0"],
        "staging": ["1.2.0", "1.3.0"],
        "production": ["1.1.0", "1.2.0"],
        "eu-production": ["1.2.0"],
    },
    "stripe.refund": {"staging": ["2.0.0", "2.1.0"], "production": ["2.0.0"], "eu-production": ["2.0.0"]},
    "kb.search": {"development": ["0.9.0"], "staging": ["0.9.0"], "production": ["0.8.0", "0.9.0"]},
    "github.create_review": {"development": ["0.3.0", "0.4.0"], "staging": ["0.3.0"]},
    "pagerduty.get_incident": {"development": ["1.0.0"], "production": ["1.0.0"], "eu-production": ["1.0.0"]},
}


def seed_tools(client: OrgdeckClient) -> None:
    existing = {tool.tool_key for tool in client.tools.list(limit=1000).items}
    for tool_key, (name, description, schema) in DEMO_TOOLS.items():
        if tool_key not in existing:
            client.tools.create(name, tool_key, description=description, input_schema=schema)
    recorded = {(r.tool_key, r.environment) for r in client.tool_deployments.list(limit=1000).items}
    for tool_key, environments in DEMO_ROLLOUTS.items():
        for environment, versions in environments.items():
            if (tool_key, environment) in recorded:
                continue
            for version in versions:
                client.tool_deployments.record(
                    tool_name=DEMO_TOOLS[tool_key][0],
                    tool_key=tool_key,
                    environment=environment,
                    provider="openai",
                    tool_id=f"fn_{tool_key.replace('.', '_')}",
                    version=version,
                    hash="sha256:" + sha256(f"{tool_key}@{version}".encode()).hexdigest()[:16],
                    tool_provider_config={"timeoutSeconds": 20, "strict": True},
                )
