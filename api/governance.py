"""Wire models of governance policies: drafting rule text with a model, and the saved policies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from api.approvals import ChangeRequestRef
from api.common import NAME_MAX_LENGTH, Description, Name, OrgScoped, Page, Patch, Record, Timestamp, Trimmed
from api.providers import ModelName
from api.resource import Resource, body

Category = Literal["security", "quality", "compliance", "identity"]
Severity = Literal["error", "warning"]
ProviderSource = Literal["system", "custom"]
CATEGORIES: tuple[str, ...] = Category.__args__
SEVERITIES: tuple[str, ...] = Severity.__args__

# The key of the built-in offline drafter among the system models; the default for drafting.
BUILTIN_DRAFTER_KEY = "builtin-template"

INSTRUCTIONS_MAX_LENGTH = 20_000
RULE_TEXT_MAX_LENGTH = 50_000
Instructions = Trimmed(INSTRUCTIONS_MAX_LENGTH)
DraftName = Annotated[str, StringConstraints(strip_whitespace=True, max_length=NAME_MAX_LENGTH)]
RuleText = Trimmed(RULE_TEXT_MAX_LENGTH)
Reference = Trimmed(200)


class GeneratePolicyPrompt(OrgScoped):
    instructions: Instructions
    name: DraftName = ""
    description: Description = ""
    category: Category = "security"
    severity: Severity = "error"
    provider_id: Reference | None = Field(None, description="With providerSource custom: the connection.")
    model_id: ModelName | None = Field(
        None, description="With providerSource custom: the model; default: the connection's default."
    )
    provider_source: ProviderSource | None = Field(
        None, description="Default: custom when providerId is given, else system."
    )
    system_model_key: Reference | None = Field(
        None,
        description=f"With providerSource system: a key of GET /providers/system; default {BUILTIN_DRAFTER_KEY}.",
    )


class TokenUsage(Record):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


class DraftingModel(Record):
    """Which model wrote a draft."""

    source: ProviderSource
    kind: str
    name: str
    model: str
    provider_id: str | None = None
    system_model_key: str | None = None


class PolicyDraft(Record):
    name: str
    description: str
    category: Category
    severity: Severity
    rule_text: str
    drafted_with: DraftingModel
    usage: TokenUsage | None = Field(None, description="Tokens used, when the provider reports them.")
    builtin: bool = Field(description="True when the built-in template drafter wrote it (no model called).")
    notice: str | None = None
    latency_ms: int


class CreatePolicy(OrgScoped):
    name: Name
    description: Description = ""
    category: Category = "security"
    severity: Severity = "error"
    rule_text: RuleText
    drafted_with: Reference | None = Field(
        None, description="Free text, e.g. the model that wrote the draft."
    )


class UpdatePolicy(OrgScoped):
    """Fields present are changed; a change of content keeps the previous content as a version."""

    name: Patch[Name] = None
    description: Patch[Description] = None
    category: Patch[Category] = None
    severity: Patch[Severity] = None
    rule_text: Patch[RuleText] = None


class PolicyVersion(Record):
    version: int
    name: str
    description: str
    category: Category
    severity: Severity
    rule_text: str
    created_at: Timestamp
    change_request: ChangeRequestRef | None = Field(
        None, description="For a version an approved change request made: who asked and who approved."
    )


class Policy(Record):
    id: str
    name: str
    description: str
    category: Category
    severity: Severity
    rule_text: str
    version: int
    drafted_with: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class PolicyWithVersions(Policy):
    versions: list[PolicyVersion] = Field(description="Every version, newest first; the first is current.")


class PoliciesResource(Resource):
    def generate(
        self,
        instructions: str,
        *,
        name: str | None = None,
        description: str | None = None,
        category: str | None = None,
        severity: str | None = None,
        provider_source: str | None = None,
        system_model_key: str | None = None,
        provider_id: str | None = None,
        model_id: str | None = None,
        org_slug: str | None = None,
    ) -> PolicyDraft:
        """Draft rule text from instructions (POST /governance/policies/generate-prompt)."""
        payload = body(
            GeneratePolicyPrompt,
            org_slug=self._org(org_slug),
            instructions=instructions,
            name=name,
            description=description,
            category=category,
            severity=severity,
            provider_source=provider_source,
            system_model_key=system_model_key,
            provider_id=provider_id,
            model_id=model_id,
        )
        answer = self._client.request("POST", "/governance/policies/generate-prompt", json=payload)
        return PolicyDraft.model_validate(answer)

    def create(
        self,
        name: str,
        rule_text: str,
        *,
        description: str | None = None,
        category: str | None = None,
        severity: str | None = None,
        drafted_with: str | None = None,
        org_slug: str | None = None,
    ) -> PolicyWithVersions:
        payload = body(
            CreatePolicy,
            org_slug=self._org(org_slug),
            name=name,
            rule_text=rule_text,
            description=description,
            category=category,
            severity=severity,
            drafted_with=drafted_with,
        )
        answer = self._client.request("POST", "/governance/policies", json=payload)
        return PolicyWithVersions.model_validate(answer)

    def list(
        self,
        *,
        category: str | None = None,
        severity: str | None = None,
        search: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[Policy]:
        """Policies newest first; `search` keeps those whose name holds it, in any case."""
        params = {
            "orgSlug": self._org(org_slug),
            "category": category,
            "severity": severity,
            "search": search,
            "limit": limit,
            "offset": offset,
        }
        return Page[Policy].model_validate(self._client.request("GET", "/governance/policies", params=params))

    def get(self, policy_id: str, *, org_slug: str | None = None) -> PolicyWithVersions:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", f"/governance/policies/{policy_id}", params=params)
        return PolicyWithVersions.model_validate(answer)

    def update(self, policy_id: str, *, org_slug: str | None = None, **changes: Any) -> PolicyWithVersions:
        """Change the given fields (name, description, category, severity, rule_text)."""
        payload = body(UpdatePolicy, org_slug=self._org(org_slug), **changes)
        answer = self._client.request("PATCH", f"/governance/policies/{policy_id}", json=payload)
        return PolicyWithVersions.model_validate(answer)

    def delete(self, policy_id: str, *, org_slug: str | None = None) -> Policy:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/governance/policies/{policy_id}", params=params)
        return Policy.model_validate(answer)
