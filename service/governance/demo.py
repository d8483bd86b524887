"""Demo governance: policies drafted by the built-in drafter, and an example local model connection."""

from __future__ import annotations

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
        )
    if EXAMPLE_PROVIDER not in {provider.name for provider in client.providers.list().items}:
        # Works once Ollama runs on this machine (`ollama pull llama3.1`); no key needed.
        client.providers.create(
            EXAMPLE_PROVIDER,
            "openai_compatible",
            base_url="http://127.0.0.1:11434/v1",
            models=["llama3.1", "qwen2.5"],
        )
