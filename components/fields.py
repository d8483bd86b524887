"""The one table of the console's field rules, in plain words, and the wording of field errors.

A rule is keyed `<form>.<field>`, the field named as on the wire (`environment.webhookUrl`). Its
words are what a form shows as the field's help before anything is typed and, should the service
refuse the value, next to the field instead of the service's own message, which may quote a
pattern. Limits come from `api`, where they are defined once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from api.agents import MAX_PROMPT_REFERENCES, MAX_TAGS
from api.common import DESCRIPTION_MAX_LENGTH, JSON_OBJECT_MAX_BYTES, NAME_MAX_LENGTH, ErrorDetail
from api.environments import MAX_SOAK_MINUTES, SECRET_VALUE_MAX_BYTES, WEBHOOK_URL_MAX_LENGTH
from api.governance import INSTRUCTIONS_MAX_LENGTH, RULE_TEXT_MAX_LENGTH
from api.registries import MAX_CONTENT_BYTES


@dataclass(frozen=True)
class FieldRule:
    label: str
    rule: str
    example: str | None = None
    max_chars: int | None = None

    @property
    def help(self) -> str:
        """The rule as a sentence, shown before anything is typed."""
        example = f", e.g. `{self.example}`" if self.example else ""
        return f"{self.rule[:1].upper()}{self.rule[1:]}{example}."

    def sentence(self, *, missing: bool = False) -> str:
        """`Name: lowercase letters, digits and hyphens, e.g. eu-production`."""
        example = f", e.g. {self.example}" if self.example else ""
        required = " is required" if missing else ""
        return f"{self.label}{required}: {self.rule}{example}"


_NAME = f"any text, at most {NAME_MAX_LENGTH} characters"
_DESCRIPTION = f"optional, at most {DESCRIPTION_MAX_LENGTH:,} characters"
_JSON = f"a JSON object, at most {JSON_OBJECT_MAX_BYTES // 1024} KiB"
_SLUG = "lowercase letters, digits and hyphens, starting and ending with a letter or digit"


def _name(label: str = "Name", example: str | None = None) -> FieldRule:
    return FieldRule(label, _NAME, example, NAME_MAX_LENGTH)


def _description() -> FieldRule:
    return FieldRule("Description", _DESCRIPTION, None, DESCRIPTION_MAX_LENGTH)


RULES: dict[str, FieldRule] = {
    # Environments and secrets
    "environment.name": FieldRule(
        "Name",
        "lowercase letters, digits and hyphens, starting with a letter or digit, at most 63",
        "eu-production",
        63,
    ),
    "environment.description": _description(),
    "environment.target": FieldRule("Target", "built-in or webhook"),
    "environment.webhookUrl": FieldRule(
        "Webhook URL",
        f"an absolute http:// or https:// address, at most {WEBHOOK_URL_MAX_LENGTH:,} characters; "
        "needed for a webhook target",
        "https://deploy.example.com/orgdeck",
        WEBHOOK_URL_MAX_LENGTH,
    ),
    "environment.verificationWebhookUrl": FieldRule(
        "Verification webhook URL",
        f"an absolute http:// or https:// address, at most {WEBHOOK_URL_MAX_LENGTH:,} characters, called "
        "after each wave of a deployment here to pass or fail it; empty for none",
        "https://checks.example.com/orgdeck",
        WEBHOOK_URL_MAX_LENGTH,
    ),
    "environment.promotesFrom": FieldRule(
        "Promotes from", "another environment of the organization, with no loop back to this one"
    ),
    "environment.soakMinutes": FieldRule(
        "Soak minutes", f"a whole number of minutes from 0 to {MAX_SOAK_MINUTES:,}"
    ),
    "secret.name": FieldRule(
        "Secret name",
        "upper-case letters, digits and underscores, starting with a letter, at most 128",
        "ZENDESK_TOKEN",
        128,
    ),
    "secret.value": FieldRule(
        "Value",
        f"not empty, at most {SECRET_VALUE_MAX_BYTES // 1024} KiB; stored encrypted and never shown again",
        None,
        SECRET_VALUE_MAX_BYTES,
    ),
    # API keys
    "apiKey.name": _name("Key name", "github-actions-deploy"),
    # Members
    "member.email": FieldRule("Email", "an email address, at most 320 characters", "dana@example.com", 320),
    "member.name": _name("Name", "Dana Reyes"),
    "member.role": FieldRule("Role", "viewer, author, operator or admin"),
    # Agents
    "agent.stableKey": FieldRule(
        "Stable key",
        "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100; "
        "it never changes",
        "support-triage",
        100,
    ),
    "agent.name": _name("Name", "Support triage"),
    "agent.provider": FieldRule(
        "Provider", "lowercase letters, digits, '.', '_' and '-', at most 64", "openai", 64
    ),
    "agent.tags": FieldRule(
        "Tags",
        f"up to {MAX_TAGS}, separated by commas; each lowercase letters, digits and - _ . : /, at most 64",
        "support, tier-1",
    ),
    "agent.providerConfig": FieldRule("Provider config", _JSON, '{"model": "gpt-4o-mini"}'),
    "agent.promptReferences": FieldRule(
        "Prompt references",
        f"a JSON object of up to {MAX_PROMPT_REFERENCES} names (letters, digits, '.', '_', '-') to "
        "references of one line",
        '{"system": "demo/support-prompts/triage-system@production"}',
    ),
    "agent.fleetId": FieldRule("Fleet", "a fleet of the organization"),
    # Fleets
    "fleet.name": _name("Name", "Customer support"),
    "fleet.description": _description(),
    "fleet.environmentIds": FieldRule("Environments", "environments of the organization, up to 100"),
    # Tools
    "tool.name": _name("Name", "Search Zendesk tickets"),
    "tool.toolKey": FieldRule(
        "Tool key",
        "lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at "
        "most 128; it never changes",
        "zendesk.search_tickets",
        128,
    ),
    "tool.description": _description(),
    "tool.inputSchema": FieldRule(
        "Input schema",
        f'a JSON Schema of an object ({{"type": "object", ...}}), at most '
        f"{JSON_OBJECT_MAX_BYTES // 1024} KiB",
    ),
    # Notification channels
    "channel.name": _name("Name", "#platform-alerts"),
    "channel.config.url": FieldRule(
        "URL",
        "an absolute http:// or https:// address, at most 2,000 characters",
        "https://hooks.example.com/orgdeck",
        2000,
    ),
    "channel.config.recipients": FieldRule(
        "Recipients", "1 to 50 email addresses, separated by commas", "oncall@example.com"
    ),
    # Governance
    "draft.instructions": FieldRule(
        "Instructions",
        f"at least one sentence, at most {INSTRUCTIONS_MAX_LENGTH:,} characters",
        "Never log customer PII.",
        INSTRUCTIONS_MAX_LENGTH,
    ),
    "draft.name": FieldRule("Name", f"optional, at most {NAME_MAX_LENGTH} characters", None, NAME_MAX_LENGTH),
    "draft.description": _description(),
    "draft.providerId": FieldRule("Provider", "one of the organization's provider connections"),
    "draft.modelId": FieldRule(
        "Model", "a model of the provider, at most 200 characters", "gpt-4o-mini", 200
    ),
    "draft.systemModelKey": FieldRule("System model", "one of the system models listed"),
    "policy.name": _name("Policy name", "No customer PII in logs"),
    "policy.description": _description(),
    "policy.category": FieldRule("Category", "security, quality, compliance or identity"),
    "policy.severity": FieldRule("Severity", "error (blocks) or warning (reports)"),
    "policy.ruleText": FieldRule(
        "Rule text", f"not empty, at most {RULE_TEXT_MAX_LENGTH:,} characters", None, RULE_TEXT_MAX_LENGTH
    ),
    "policy.check": FieldRule(
        "Check",
        "a CEL expression over agent, environment and deployment that is true when they comply",
        "agent.model != 'gpt-3.5-turbo'",
    ),
    "policy.message": FieldRule(
        "Message", "what is wrong, in words; starting with =, a CEL expression giving the text"
    ),
    "policy.enforcement": FieldRule(
        "Enforcement", "audit, warn or deny; deny needs a check whose examples all pass"
    ),
    "policy.examples": FieldRule(
        "Examples", "each a name, an input JSON object {agent, environment, deployment} and pass or fail"
    ),
    "policy.scope": FieldRule("Scope", "environments and agents the policy applies to"),
    "exception.policyId": FieldRule("Policy", "one of the organization's policies"),
    "exception.agentStableKey": FieldRule("Agent", "an agent's stable key, or empty for every agent"),
    "exception.environmentName": FieldRule("Environment", "an environment's name, or empty for every one"),
    "exception.reason": FieldRule(
        "Reason", "why the exception is needed, at most 2,000 characters", None, 2000
    ),
    "exception.expiresAt": FieldRule("Expires", "a moment in the future, at most 90 days ahead"),
    # Registries
    "registry.name": FieldRule("Name", f"{_SLUG}, at most 63", "support-prompts", 63),
    "registry.description": _description(),
    "artifact.name": FieldRule(
        "Artifact",
        "lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 100",
        "triage-system",
        100,
    ),
    "artifact.content": FieldRule(
        "Prompt", f"text, or a JSON list of chat messages; at most {MAX_CONTENT_BYTES // 1024} KiB"
    ),
    "artifact.version": FieldRule("Version", "empty for the next number, or a semantic version", "1.4.0", 64),
    "artifact.labels": FieldRule(
        "Labels",
        "separated by commas; each a lowercase letter, then letters, digits, '_' or '-'",
        "staging, production",
    ),
    "artifact.commitMessage": FieldRule("Commit message", _DESCRIPTION, None, DESCRIPTION_MAX_LENGTH),
    # LLM providers
    "provider.name": _name("Name", "Team OpenAI"),
    "provider.baseUrl": FieldRule(
        "Base URL",
        "an http:// or https:// address; required for Azure OpenAI and OpenAI-compatible servers",
        "http://127.0.0.1:11434/v1",
        2000,
    ),
    "provider.apiKey": FieldRule("API key", "at most 4,000 characters; stored encrypted", None, 4000),
    "provider.models": FieldRule("Models", "up to 100 names, separated by commas", "gpt-4o-mini, gpt-4o"),
    "provider.defaultModel": FieldRule("Default model", "one of the models, at most 200", "gpt-4o-mini", 200),
    # Deployments
    "deployment.environmentId": FieldRule("Environment", "an environment of the organization"),
    "deployment.agentStableKeys": FieldRule("Agents", "at least one agent with a version"),
    "deployment.model": FieldRule("Model", "one word without spaces, at most 200", "gpt-4o", 200),
    "deployment.promptName": FieldRule("Pin prompt", "a prompt reference name of the agents", "system"),
    "deployment.version": FieldRule("to version", "a version of that prompt", "1.4.0"),
    "deployment.toolRefs": FieldRule("Tools", "tool keys of the organization"),
    "deployment.agentVersions": FieldRule(
        "Versions", "key=number pairs separated by commas", "support-triage=2"
    ),
    "deployment.agentProviderConfig": FieldRule("Provider config", _JSON, '{"temperature": 0.1}'),
}

# Pydantic's own checks, whose messages quote patterns and types: worded from the rule instead.
# Messages the service writes itself (a duplicate name, a reserved key) are already in words.
_CHECKS = frozenset(
    {
        "missing",
        "string_type",
        "string_pattern_mismatch",
        "string_too_short",
        "string_too_long",
        "too_short",
        "too_long",
        "list_type",
        "dict_type",
        "literal_error",
        "enum",
        "int_type",
        "int_parsing",
        "greater_than_equal",
        "less_than_equal",
    }
)
_PATTERN = re.compile(r"(?:string )?should match pattern '.*'|must match .*\^.*\$.*")
_ITEM = re.compile(r"\.(\d+)(?=\.|$)")
# Pydantic's prefix to the words of a validator of ours.
_VALUE_ERROR = re.compile(r"^value error,\s*", re.IGNORECASE)


def rule(key: str) -> FieldRule:
    return RULES[key]


def worded(form: str, detail: ErrorDetail) -> str:
    """What the service said about a field, in the words of the field's rule.

    `tags.2` is the third tag: its rule is the rule of `tags`.
    """
    field = detail.field or ""
    items = [int(n) + 1 for n in _ITEM.findall(field)]
    found = RULES.get(f"{form}.{_ITEM.sub('', field)}")
    label = found.label if found else _ITEM.sub("", field) or "Request"
    if items:
        label = f"{label} (item {items[-1]})"
    if found is not None and detail.type in _CHECKS:
        missing = detail.type == "missing" or (
            detail.type == "string_too_short" and "1 character" in detail.message
        )
        return FieldRule(label, found.rule, found.example).sentence(missing=missing)
    message = _PATTERN.sub("has characters that are not allowed", _VALUE_ERROR.sub("", detail.message))
    return f"{label}: {message}"


def field_of(detail: ErrorDetail) -> str:
    """The field a detail is about, as forms register it (`tags.2` → `tags`)."""
    return _ITEM.sub("", detail.field or "")
