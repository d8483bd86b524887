"""Wire models of governance policies: drafting rule text with a model, and the saved policies."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from api.approvals import ChangeRequestRef
from api.common import (
    NAME_MAX_LENGTH,
    Description,
    JsonObject,
    Moment,
    Name,
    OrgScoped,
    Page,
    Patch,
    Record,
    Request,
    Timestamp,
    Trimmed,
)
from api.providers import ModelName
from api.resource import Resource, body

Category = Literal["security", "quality", "compliance", "identity"]
Severity = Literal["error", "warning"]
ProviderSource = Literal["system", "custom"]
Enforcement = Literal["audit", "warn", "deny"]
Expectation = Literal["pass", "fail"]
CheckOutcome = Literal["pass", "fail", "error"]
ENFORCEMENTS: tuple[str, ...] = Enforcement.__args__
# What a policy's enforcement is when a create leaves it out: by its severity.
DEFAULT_ENFORCEMENT: dict[str, Enforcement] = {"error": "deny", "warning": "warn"}
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
CheckSource = Trimmed(10_000)
CheckMessage = Trimmed(2_000)
EXAMPLES_MAX = 50
SCOPE_NAMES_MAX = 200


class EnvironmentScope(Request):
    """Which environments a policy applies to: all, those named, or the protected ones."""

    match: Literal["all", "names", "protected"] = "all"
    names: list[Name] = Field(default_factory=list, max_length=SCOPE_NAMES_MAX)


class AgentScope(Request):
    """Which agents a policy applies to: all, those with any of the tags, or members of the fleets."""

    match: Literal["all", "tags", "fleets"] = "all"
    tags: list[Name] = Field(default_factory=list, max_length=SCOPE_NAMES_MAX)
    fleet_ids: list[Reference] = Field(default_factory=list, max_length=SCOPE_NAMES_MAX)


class PolicyScope(Request):
    environments: EnvironmentScope = Field(default_factory=EnvironmentScope)
    agents: AgentScope = Field(default_factory=AgentScope)


class PolicyExample(Request):
    """An input `{agent, environment, deployment}` and whether the check must pass or fail on it."""

    name: Name
    input: JsonObject
    expect: Expectation


class ExampleResult(Record):
    name: str
    expect: Expectation
    outcome: CheckOutcome
    passed: bool = Field(description="The outcome is the expectation.")
    message: str | None = Field(None, description="The policy's message on a fail; the error on an error.")


class Violation(Record):
    """A policy an agent breaks (or whose check cannot be evaluated on it) in an environment."""

    policy_id: str
    policy_name: str
    policy_version: int
    enforcement: Enforcement
    agent: str = Field(description="The agent's stable key.")
    environment_name: str
    outcome: Literal["fail", "error"]
    message: str
    exception_id: str | None = Field(None, description="The live exception that lets a deny through.")


class ImpactEntry(Record):
    """An agent that runs now in an environment and would break the policy."""

    agent: str
    environment_name: str
    outcome: Literal["fail", "error"]
    message: str


class TestPolicyCheck(OrgScoped):
    """An unsaved check with its examples (and optionally scope, for its impact on what runs)."""

    check: CheckSource
    message: CheckMessage | None = None
    examples: list[PolicyExample] = Field(default_factory=list, max_length=EXAMPLES_MAX)
    scope: PolicyScope = Field(default_factory=PolicyScope)


class PolicyTestResult(Record):
    examples: list[ExampleResult]
    passed: bool = Field(description="Every example has its expected outcome (and there is at least one).")
    impact: list[ImpactEntry] = Field(description="What runs now that the check would flag.")


class AppliedPolicy(Record):
    """A policy as an agent receives it in a deployment's payload."""

    id: str
    name: str
    version: int
    rule_text: str


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
    check: str | None = Field(None, description="The CEL check drafted with the rule; null when none was.")
    message: str | None = None
    enforcement: Enforcement | None = Field(
        None, description="Suggested: by severity once the examples pass; audit while they fail."
    )
    scope: PolicyScope = Field(
        default_factory=PolicyScope, description="Suggested: the environments the instructions name."
    )
    examples: list[PolicyExample] = Field(default_factory=list, description="At least one pass and one fail.")


class CreatePolicy(OrgScoped):
    name: Name
    description: Description = ""
    category: Category = "security"
    severity: Severity = "error"
    rule_text: RuleText
    drafted_with: Reference | None = Field(
        None, description="Free text, e.g. the model that wrote the draft."
    )
    check: CheckSource | None = Field(None, description="A CEL expression; true means the subject complies.")
    message: CheckMessage | None = Field(
        None, description="What is wrong, in words; starting with `=`, a CEL string expression."
    )
    enforcement: Enforcement | None = Field(
        None, description="Default: deny for severity error, warn for warning."
    )
    scope: PolicyScope = Field(default_factory=PolicyScope)
    examples: list[PolicyExample] = Field(default_factory=list, max_length=EXAMPLES_MAX)


class UpdatePolicy(OrgScoped):
    """Fields present are changed; a change of content keeps the previous content as a version."""

    name: Patch[Name] = None
    description: Patch[Description] = None
    category: Patch[Category] = None
    severity: Patch[Severity] = None
    rule_text: Patch[RuleText] = None
    check: CheckSource | None = Field(None, description="null removes the check.")
    message: CheckMessage | None = Field(None, description="null removes the message.")
    enforcement: Patch[Enforcement] = None
    scope: Patch[PolicyScope] = None
    examples: Patch[list[PolicyExample]] = Field(None, max_length=EXAMPLES_MAX)


class PolicyVersion(Record):
    version: int
    name: str
    description: str
    category: Category
    severity: Severity
    rule_text: str
    check: str | None = None
    message: str | None = None
    enforcement: Enforcement
    scope: PolicyScope
    examples: list[PolicyExample]
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
    check: str | None = None
    message: str | None = None
    enforcement: Enforcement
    scope: PolicyScope
    examples: list[PolicyExample]
    version: int
    drafted_with: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class PolicyWithVersions(Policy):
    versions: list[PolicyVersion] = Field(description="Every version, newest first; the first is current.")
    example_results: list[ExampleResult] | None = Field(None, description="How its examples run now.")
    impact: list[ImpactEntry] | None = Field(None, description="What runs now that its check flags.")


class CreatePolicyException(OrgScoped):
    """Lets deployments through a deny policy for an agent, an environment, or both, until expiresAt."""

    policy_id: Reference
    agent_stable_key: Reference | None = None
    environment_name: Name | None = None
    reason: Trimmed(2_000)
    expires_at: Moment


class PolicyException(Record):
    id: str
    policy_id: str
    agent_stable_key: str | None = None
    environment_name: str | None = None
    reason: str
    expires_at: Timestamp
    created_by: str
    created_at: Timestamp
    revoked_at: Timestamp | None = None
    live: bool = Field(description="Not revoked and not expired.")


class ComplianceCell(Record):
    policy_id: str
    policy_name: str
    environment_name: str
    violations: int
    compliant: int


class ComplianceViolation(Record):
    agent: str
    environment_name: str
    policy_id: str
    policy_name: str
    enforcement: Enforcement
    message: str
    since: Timestamp = Field(description="When the violating deployment record was made.")


class Compliance(Record):
    matrix: list[ComplianceCell]
    violations: list[ComplianceViolation]
    evaluated_at: Timestamp


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
        check: str | None = None,
        message: str | None = None,
        enforcement: str | None = None,
        scope: dict[str, Any] | None = None,
        examples: list[dict[str, Any]] | None = None,
        org_slug: str | None = None,
    ) -> PolicyWithVersions:
        """Save a policy; `scope` and `examples` in wire form (camelCase), as the policy's own."""
        payload = body(
            CreatePolicy,
            org_slug=self._org(org_slug),
            name=name,
            rule_text=rule_text,
            description=description,
            category=category,
            severity=severity,
            drafted_with=drafted_with,
            check=check,
            message=message,
            enforcement=enforcement,
        ) | _given(scope=scope, examples=examples)
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
        """Change the given fields (name, description, category, severity, rule_text, check, message,
        enforcement, and scope and examples in wire form); `check=None` or `message=None` removes it."""
        removed = {name: None for name in ("check", "message") if name in changes and changes[name] is None}
        given = _given(**{name: changes.pop(name) for name in ("scope", "examples") if name in changes})
        payload = body(UpdatePolicy, org_slug=self._org(org_slug), **changes) | given | removed
        answer = self._client.request("PATCH", f"/governance/policies/{policy_id}", json=payload)
        return PolicyWithVersions.model_validate(answer)

    def delete(self, policy_id: str, *, org_slug: str | None = None) -> Policy:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/governance/policies/{policy_id}", params=params)
        return Policy.model_validate(answer)

    def test(self, policy_id: str, *, org_slug: str | None = None) -> PolicyTestResult:
        """Run a saved policy's examples and say what it flags of what runs now."""
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("POST", f"/governance/policies/{policy_id}/test", params=params)
        return PolicyTestResult.model_validate(answer)

    def test_check(
        self,
        check: str,
        *,
        message: str | None = None,
        examples: list[dict[str, Any]] | None = None,
        scope: dict[str, Any] | None = None,
        org_slug: str | None = None,
    ) -> PolicyTestResult:
        """Run an unsaved check on its examples and on what runs now; nothing is saved. `examples`
        and `scope` are in wire form (camelCase), as the policy's own."""
        payload = body(TestPolicyCheck, org_slug=self._org(org_slug), check=check, message=message)
        payload |= {
            key: value for key, value in (("examples", examples), ("scope", scope)) if value is not None
        }
        answer = self._client.request("POST", "/governance/policies/test", json=payload)
        return PolicyTestResult.model_validate(answer)

    def compliance(self, *, org_slug: str | None = None) -> Compliance:
        """Every policy with a check against what runs now in every environment."""
        params = {"orgSlug": self._org(org_slug)}
        return Compliance.model_validate(self._client.request("GET", "/governance/compliance", params=params))

    def create_exception(
        self,
        policy_id: str,
        reason: str,
        expires_at: datetime,
        *,
        agent_stable_key: str | None = None,
        environment_name: str | None = None,
        org_slug: str | None = None,
    ) -> PolicyException:
        """Let deployments through a deny policy until `expires_at` (at most 90 days ahead)."""
        payload = body(
            CreatePolicyException,
            org_slug=self._org(org_slug),
            policy_id=policy_id,
            reason=reason,
            expires_at=expires_at,
            agent_stable_key=agent_stable_key,
            environment_name=environment_name,
        )
        answer = self._client.request("POST", "/governance/exceptions", json=payload)
        return PolicyException.model_validate(answer)

    def exceptions(
        self, *, limit: int | None = None, offset: int | None = None, org_slug: str | None = None
    ) -> Page[PolicyException]:
        params = {"orgSlug": self._org(org_slug), "limit": limit, "offset": offset}
        answer = self._client.request("GET", "/governance/exceptions", params=params)
        return Page[PolicyException].model_validate(answer)

    def revoke_exception(self, exception_id: str, *, org_slug: str | None = None) -> PolicyException:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/governance/exceptions/{exception_id}", params=params)
        return PolicyException.model_validate(answer)


def _given(**fields: Any) -> dict[str, Any]:
    """Fields already in wire form (scope, examples), sent as given: the service validates them."""
    return {name: value for name, value in fields.items() if value is not None}
