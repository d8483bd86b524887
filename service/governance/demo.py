"""Demo governance: policies drafted by the built-in drafter, two of them with a check that some
demo agents break (so the compliance view has something to show on first start), and an example
local model connection."""

from __future__ import annotations

from typing import Any

from api import OrgdeckClient
from api.common import MAX_PAGE_SIZE

EXAMPLE_PROVIDER = "Local Ollama (example)"
DEMO_POLICIES = (
    (
        "No customer data in logs",
        "security",
        "error",
        "Never log customer PII such as names, emails or card numbers. Mask identifiers before they "
        "reach traces. Always use TLS for outbound calls.",
    ),
    (
        "Cite sources in answers",
        "quality",
        "warning",
        "Agents must cite the knowledge-base article behind every factual answer. Never invent a "
        "link. Say so when no source supports the answer.",
    ),
    (
        "Keep records of refunds",
        "compliance",
        "error",
        "Agents must record every refund decision with the order id and the reason. Do not delete "
        "decision records before seven years have passed.",
    ),
    (
        "Act under the agent's own identity",
        "identity",
        "error",
        "Agents must call tools with their own service identity. Never reuse a person's session token. "
        "Request only the scopes the task needs.",
    ),
)


def _example(name: str, expect: str, **agent: Any) -> dict[str, Any]:
    return {"name": name, "input": {"agent": agent}, "expect": expect}


# Checks of two demo policies, by name. Neither denies: the demo's own deployments, seeded after the
# policies, would be refused; warn and audit show in the compliance view all the same.
DEMO_CHECKS: dict[str, dict[str, Any]] = {
    "Cite sources in answers": {
        "check": "double(agent.providerConfig.temperature) <= 0.2",
        "message": "Customer-facing answers need a temperature of at most 0.2 to stay with their sources",
        "enforcement": "warn",
        "scope": {"agents": {"match": "tags", "tags": ["customer-facing"]}},
        "examples": [
            _example("steady answers", "pass", providerConfig={"temperature": 0.2}),
            _example("creative answers", "fail", providerConfig={"temperature": 0.7}),
        ],
    },
    "Keep records of refunds": {
        "check": "!has(agent.providerConfig.tools) || !('stripe.refund' in agent.providerConfig.tools) "
        "|| 'payments' in agent.tags",
        "message": "An agent that can refund must be tagged payments, whose decisions are recorded",
        "enforcement": "audit",
        "examples": [
            _example(
                "payments agent", "pass", tags=["payments"], providerConfig={"tools": ["stripe.refund"]}
            ),
            _example("untagged refunder", "fail", tags=["risk"], providerConfig={"tools": ["stripe.refund"]}),
        ],
    },
}


def seed_governance(client: OrgdeckClient) -> None:
    existing = {policy.name for policy in client.policies.list(limit=MAX_PAGE_SIZE).items}
    for name, category, severity, instructions in DEMO_POLICIES:
        if name in existing:
            continue
        draft = client.policies.generate(instructions, name=name, category=category, severity=severity)
        client.policies.create(
            draft.name,
            draft.rule_text,
            category=category,
            severity=severity,
            drafted_with=draft.drafted_with.name,
            **DEMO_CHECKS.get(name, {}),
        )
    if EXAMPLE_PROVIDER not in {provider.name for provider in client.providers.list().items}:
        # Works once Ollama runs on this machine (`ollama pull llama3.1`); no key needed.
        client.providers.create(
            EXAMPLE_PROVIDER,
            "openai_compatible",
            base_url="http://127.0.0.1:11434/v1",
            models=["llama3.1", "qwen2.5"],
        )
