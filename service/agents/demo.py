"""Demo fleets and a dozen agents, each with a short history of versions (the draft edited between them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api import OrgdeckClient

TRIAGE = "demo/support-prompts/triage-system@production"
REFUND_POLICY = "demo/support-prompts/refund-policy@production"
ESCALATION = "demo/support-prompts/escalation@staging"
TONE = "demo/shared-prompts/tone-guide@latest"
SAFETY = "demo/shared-prompts/safety-preamble@production"

DEMO_FLEETS = {
    "Customer support": "Agents that answer, route and resolve customer conversations.",
    "Engineering": "Agents that help engineers review code and handle incidents.",
    "Revenue operations": "Agents working on billing, refunds and account changes.",
}


@dataclass(frozen=True)
class DemoAgent:
    stable_key: str
    name: str
    provider: str
    fleet: str | None
    tags: list[str]
    prompt_references: dict[str, str]
    # One provider config per version, oldest first; the last one is also the current draft.
    history: list[dict[str, Any]]
    # A change made after the last snapshot, so the console shows an agent with unversioned edits.
    pending_edit: dict[str, Any] = field(default_factory=dict)


def _openai(model: str, temperature: float, **extra: Any) -> dict[str, Any]:
    return {"model": model, "temperature": temperature, **extra}


def _anthropic(model: str, temperature: float, **extra: Any) -> dict[str, Any]:
    return {"model": model, "temperature": temperature, "max_tokens": 2048, **extra}


DEMO_AGENTS = [
    DemoAgent(
        "support-triage",
        "Support triage",
        "openai",
        "Customer support",
        ["support", "tier-1", "customer-facing"],
        {"system": TRIAGE, "tone": TONE, "safety": SAFETY},
        [
            _openai("gpt-4o-mini", 0.4),
            _openai("gpt-4o-mini", 0.2),
            _openai("gpt-4o", 0.2, tools=["zendesk.search_tickets", "kb.search"]),
        ],
    ),
    DemoAgent(
        "refund-assistant",
        "Refund assistant",
        "anthropic",
        "Revenue operations",
        ["billing", "payments", "customer-facing"],
        {"system": REFUND_POLICY, "escalation": ESCALATION, "safety": SAFETY},
        [
            _anthropic("claude-3-5-haiku", 0.3, tools=["stripe.refund"]),
            _anthropic("claude-3-5-sonnet", 0.2, tools=["stripe.refund"]),
            _anthropic("claude-3-5-sonnet", 0.1, tools=["stripe.refund", "zendesk.search_tickets"]),
        ],
        pending_edit={"max_refund_cents": 50_000},
    ),
    DemoAgent(
        "kb-answerer",
        "Knowledge-base answerer",
        "openai",
        "Customer support",
        ["support", "self-service", "customer-facing"],
        {"system": TRIAGE, "tone": TONE},
        [_openai("gpt-4o-mini", 0.5), _openai("gpt-4o-mini", 0.3, tools=["kb.search"])],
    ),
    DemoAgent(
        "escalation-router",
        "Escalation router",
        "anthropic",
        "Customer support",
        ["support", "tier-2"],
        {"system": ESCALATION, "tone": TONE},
        [
            _anthropic("claude-3-5-haiku", 0.0),
            _anthropic("claude-3-5-haiku", 0.0, tools=["slack.post_message"]),
        ],
    ),
    DemoAgent(
        "csat-summarizer",
        "CSAT survey summarizer",
        "openai",
        "Customer support",
        ["support", "analytics"],
        {"tone": TONE},
        [_openai("gpt-4o-mini", 0.3)],
    ),
    DemoAgent(
        "chargeback-analyst",
        "Chargeback analyst",
        "anthropic",
        "Revenue operations",
        ["billing", "risk"],
        {"system": REFUND_POLICY, "safety": SAFETY},
        [_anthropic("claude-3-5-sonnet", 0.2), _anthropic("claude-3-5-sonnet", 0.1, tools=["stripe.refund"])],
    ),
    DemoAgent(
        "invoice-explainer",
        "Invoice explainer",
        "openai",
        "Revenue operations",
        ["billing", "customer-facing"],
        {"tone": TONE, "safety": SAFETY},
        [_openai("gpt-4o-mini", 0.4), _openai("gpt-4o", 0.3)],
        pending_edit={"temperature": 0.2},
    ),
    DemoAgent(
        "code-reviewer",
        "Code reviewer",
        "anthropic",
        "Engineering",
        ["engineering", "internal"],
        {"safety": SAFETY},
        [
            _anthropic("claude-3-5-sonnet", 0.2, tools=["github.create_review"]),
            _anthropic("claude-3-7-sonnet", 0.2, tools=["github.create_review"]),
            _anthropic("claude-3-7-sonnet", 0.1, tools=["github.create_review"], review_depth="thorough"),
        ],
    ),
    DemoAgent(
        "incident-summarizer",
        "Incident summarizer",
        "openai",
        "Engineering",
        ["engineering", "on-call", "internal"],
        {"tone": TONE},
        [
            _openai("gpt-4o", 0.3, tools=["pagerduty.get_incident"]),
            _openai("gpt-4o", 0.2, tools=["pagerduty.get_incident", "slack.post_message"]),
        ],
    ),
    DemoAgent(
        "release-notes-writer",
        "Release notes writer",
        "openai",
        "Engineering",
        ["engineering", "docs"],
        {"tone": TONE},
        [_openai("gpt-4o-mini", 0.7), _openai("gpt-4o", 0.6)],
    ),
    DemoAgent(
        "log-anomaly-detector",
        "Log anomaly detector",
        "anthropic",
        "Engineering",
        ["engineering", "on-call", "observability"],
        {"safety": SAFETY},
        [_anthropic("claude-3-5-haiku", 0.0)],
    ),
    DemoAgent(
        "sales-email-drafter",
        "Sales email drafter",
        "openai",
        None,
        ["sales", "experimental"],
        {"tone": TONE, "safety": SAFETY},
        [_openai("gpt-4o-mini", 0.8)],
        pending_edit={"temperature": 0.6},
    ),
]


def seed_agents(client: OrgdeckClient) -> None:
    fleet_ids = _seed_fleets(client)
    existing = {agent.stable_key for agent in client.agents.list(limit=1000).items}
    for demo in DEMO_AGENTS:
        if demo.stable_key not in existing:
            _seed_agent(client, demo, fleet_ids)


def _seed_fleets(client: OrgdeckClient) -> dict[str, str]:
    fleet_ids = {fleet.name: fleet.id for fleet in client.fleets.list(limit=1000).items}
    for name, description in DEMO_FLEETS.items():
        if name not in fleet_ids:
            fleet_ids[name] = client.fleets.create(name, description=description).id
    return fleet_ids


def _seed_agent(client: OrgdeckClient, demo: DemoAgent, fleet_ids: dict[str, str]) -> None:
    client.agents.create(
        demo.stable_key,
        demo.provider,
        name=demo.name,
        tags=demo.tags,
        provider_config=demo.history[0],
        prompt_references=demo.prompt_references,
        fleet_id=fleet_ids[demo.fleet] if demo.fleet else None,
    )
    client.agents.snapshot(demo.stable_key)
    for provider_config in demo.history[1:]:
        client.agents.update(demo.stable_key, provider_config=provider_config)
        client.agents.snapshot(demo.stable_key)
    if demo.pending_edit:
        client.agents.update(demo.stable_key, provider_config={**demo.history[-1], **demo.pending_edit})
