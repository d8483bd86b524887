"""Governance policies: drafting rule text with a model (or the built-in drafter), saving and versioning.

Where the organization requires approval of policies, they are saved, changed and deleted only by
approved change requests, which the versions they make name (`change_request`, kept with each
version as it was applied)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from api.approvals import ChangeRequestRef
from api.governance import (
    BUILTIN_DRAFTER_KEY,
    DEFAULT_ENFORCEMENT,
    CreatePolicy,
    DraftingModel,
    ExampleResult,
    GeneratePolicyPrompt,
    PolicyDraft,
    PolicyExample,
    PolicyTestResult,
    TestPolicyCheck,
    TokenUsage,
    UpdatePolicy,
)
from service.deployments import states
from service.errors import AlreadyExists, ApprovalRequired, InvalidInput, NotFound
from service.governance import evaluation
from service.governance.checks import (
    NOT_BOOLEAN,
    CheckInvalid,
    evaluate_message,
    on_examples,
    validate_message,
)
from service.governance.drafting import (
    DRAFT_MAX_TOKENS,
    SYSTEM_PROMPT,
    builtin_checked_draft,
    headed,
    model_checked_draft,
    restated,
    title_of,
)
from service.governance.models import PolicyRow, PolicyVersionRow
from service.orgs.models import OrganizationRow
from service.providers import service as providers
from service.providers.adapters import Completion, ModelEndpoint
from service.providers.system_models import BUILTIN_KIND
from service.settings import Settings
from service.storage.crypto import Cipher

BUILTIN_NOTICE = (
    "Drafted by the built-in template drafter: no language model was called. It restates the "
    "instructions as numbered MUST / MUST NOT statements; choose a system model or one of your "
    "provider connections for a draft written by a model."
)
VERSIONED_FIELDS = (
    "name",
    "description",
    "category",
    "severity",
    "rule_text",
    "check",
    "message",
    "enforcement",
    "scope",
    "examples",
)


@dataclass(frozen=True)
class DraftingTarget:
    """Who writes a draft: the built-in drafter (no endpoint) or a model behind an endpoint."""

    drafted_with: DraftingModel
    endpoint: ModelEndpoint | None = None
    # Operator-configured system models are trusted; organizations' own URLs pass the outbound rule.
    operator_configured: bool = False


def drafting_target(
    session: Session, *, org_id: str, request: GeneratePolicyPrompt, settings: Settings, cipher: Cipher
) -> DraftingTarget:
    """Resolve providerSource, providerId, modelId and systemModelKey into the model to call."""
    source = request.provider_source or ("custom" if request.provider_id else "system")
    if source == "custom":
        return _custom_target(session, org_id=org_id, request=request, cipher=cipher)
    for field, value in (("providerId", request.provider_id), ("modelId", request.model_id)):
        if value is not None:
            raise InvalidInput(f"{field} applies to providerSource custom only", field=field)
    return _system_target(request.system_model_key or BUILTIN_DRAFTER_KEY, settings)


def draft(target: DraftingTarget, *, request: GeneratePolicyPrompt, settings: Settings) -> PolicyDraft:
    """Write the draft, its check tested on its examples. Takes no session: a slow provider holds no
    database transaction."""
    started = time.monotonic()
    usage = None
    drafted_with = target.drafted_with
    if target.endpoint is None:
        checked = builtin_checked_draft(request)
        notice = " ".join(filter(None, [BUILTIN_NOTICE, checked.notice]))
    else:
        checked, answers = model_checked_draft(
            lambda prompt: _ask(target, prompt=prompt, settings=settings), request
        )
        notice = checked.notice
        # The model the provider says answered: an alias like gpt-4o names a dated snapshot there.
        drafted_with = drafted_with.model_copy(update={"model": answers[-1].model})
        usage = _usage(answers)
    return PolicyDraft(
        name=title_of(checked.rule_text, request),
        description=request.description,
        category=request.category,
        severity=request.severity,
        rule_text=checked.rule_text,
        drafted_with=drafted_with,
        usage=usage,
        builtin=target.endpoint is None,
        notice=notice,
        latency_ms=round((time.monotonic() - started) * 1000),
        check=checked.check,
        message=checked.message,
        enforcement=checked.enforcement(request.severity),
        scope=checked.scope,
        examples=checked.examples,
    )


def _usage(answers: list[Completion]) -> TokenUsage | None:
    """The tokens of every call a draft took, when the provider reports them."""
    reported = [a for a in answers if a.input_tokens is not None or a.output_tokens is not None]
    if not reported:
        return None

    def total(counts: list[int | None]) -> int | None:
        return None if all(c is None for c in counts) else sum(c or 0 for c in counts)

    return TokenUsage(
        input_tokens=total([a.input_tokens for a in reported]),
        output_tokens=total([a.output_tokens for a in reported]),
        total_tokens=total([a.total_tokens for a in reported]),
    )


def create_policy(
    session: Session, *, org_id: str, request: CreatePolicy, change_request: ChangeRequestRef | None = None
) -> PolicyRow:
    """Save a policy as version 1 (through a change request where the organization requires it:
    `change_request`, which the version names)."""
    if change_request is None:
        require_review_of_policies(session, org_id=org_id)
    _refuse_duplicate_name(session, org_id=org_id, name=request.name)
    fields = {"name": request.name, "category": request.category, "severity": request.severity}
    enforcement = request.enforcement or DEFAULT_ENFORCEMENT[request.severity]
    examples = [example.model_dump(mode="json", by_alias=True) for example in request.examples]
    results = tested(request.check, request.message, examples)
    _refuse_untested_deny(
        enforcement, request.check, results, explicit="enforcement" in request.model_fields_set
    )
    policy = PolicyRow(
        org_id=org_id,
        name=request.name,
        description=request.description,
        category=request.category,
        severity=request.severity,
        rule_text=headed(request.rule_text, fields),
        check=request.check,
        message=request.message,
        enforcement=enforcement,
        scope=request.scope.model_dump(mode="json", by_alias=True),
        examples=examples,
        drafted_with=request.drafted_with,
        version=1,
    )
    policy.versions.append(_snapshot(policy, change_request))
    session.add(policy)
    session.flush()
    # What agents receive changed: what runs drifts from it.
    states.refresh_org(session, org_id=org_id)
    found = evaluation.noticed_running(session, org_id=org_id, policy=policy)
    evaluation.announce_new_in_running(session, org_id=org_id, before={}, after=found, cause="policySaved")
    return policy


def tested(check: str | None, message: str | None, examples: list[dict[str, Any]]) -> list[ExampleResult]:
    """Run a check on its examples; CheckInvalid (400) when it does not compile or answers something
    other than a boolean on one of them."""
    validate_message(message)
    if check is None:
        return []
    results = []
    for example, result in on_examples(check, map(PolicyExample.model_validate, examples)):
        if result.outcome == "error" and result.error and result.error.startswith(NOT_BOOLEAN):
            raise CheckInvalid(f"{result.error} on example '{example.name}'")
        said = result.error if result.outcome == "error" else evaluate_message(message, example.input)
        results.append(
            ExampleResult(
                name=example.name,
                expect=example.expect,
                outcome=result.outcome,
                passed=result.outcome == example.expect,
                message=said if result.outcome != "pass" else None,
            )
        )
    return results


def _refuse_untested_deny(
    enforcement: str, check: str | None, results: list[ExampleResult], *, explicit: bool
) -> None:
    """A deny policy's check must be tested: at least one example, every one as expected. Asked
    for without a check it is refused too (a severity's default deny on a policy without a check
    stands: there is nothing to enforce until a check is added, which then needs its examples)."""
    if enforcement != "deny":
        return
    if check is None:
        if explicit:
            raise InvalidInput("enforcement deny needs a check to enforce", field="enforcement")
        return
    failing = [result.name for result in results if not result.passed]
    if not results or failing:
        why = "it has no examples" if not results else f"these examples fail: {', '.join(failing)}"
        raise InvalidInput(
            f"enforcement deny needs a check whose examples all pass; {why} (use audit or warn meanwhile)",
            field="enforcement",
        )


def list_policies(
    session: Session,
    *,
    org_id: str,
    category: str | None,
    severity: str | None,
    search: str | None,
    limit: int,
    offset: int,
) -> tuple[list[PolicyRow], int]:
    """One page of the organization's policies, newest first, and how many match in all; `search`
    keeps those whose name holds it, in any case."""
    conditions = [PolicyRow.org_id == org_id]
    if category is not None:
        conditions.append(PolicyRow.category == category)
    if severity is not None:
        conditions.append(PolicyRow.severity == severity)
    if search:
        conditions.append(func.lower(PolicyRow.name).contains(search.lower(), autoescape=True))
    total = session.scalar(select(func.count()).select_from(PolicyRow).where(*conditions)) or 0
    query = select(PolicyRow).where(*conditions).order_by(PolicyRow.created_at.desc(), PolicyRow.id.desc())
    return list(session.scalars(query.limit(limit).offset(offset))), total


def get_policy(session: Session, *, org_id: str, policy_id: str, lock: bool = False) -> PolicyRow:
    """The organization's policy with its versions; another organization's is not found. With
    `lock`, its row is locked until the transaction ends, so changes to it take turns."""
    query = (
        select(PolicyRow)
        .where(PolicyRow.id == policy_id, PolicyRow.org_id == org_id)
        .options(selectinload(PolicyRow.versions))
    )
    policy = session.scalar(query.with_for_update(of=PolicyRow) if lock else query)
    if policy is None:
        raise NotFound(f"No policy '{policy_id}' in this organization", field="policyId")
    return policy


def update_policy(
    session: Session,
    *,
    org_id: str,
    policy_id: str,
    request: UpdatePolicy,
    change_request: ChangeRequestRef | None = None,
) -> PolicyRow:
    """Apply the given fields; a change of content becomes a new version (naming the approved
    change request that made it, if one did), the old one is kept."""
    policy = get_policy(session, org_id=org_id, policy_id=policy_id)
    if change_request is None:
        require_review_of_policies(session, org_id=org_id)
    sent = {
        field: _stored(getattr(request, field))
        for field in VERSIONED_FIELDS
        if field in request.model_fields_set
    }
    changes = {field: value for field, value in sent.items() if value != getattr(policy, field)}
    check, message = changes.get("check", policy.check), changes.get("message", policy.message)
    examples = changes.get("examples", policy.examples)
    enforcement = changes.get("enforcement", policy.enforcement)
    if {"check", "message", "examples", "enforcement"} & changes.keys():
        results = tested(check, message, examples)
        _refuse_untested_deny(enforcement, check, results, explicit="enforcement" in changes)
    if not changes:
        return policy
    if "name" in changes:
        _refuse_duplicate_name(session, org_id=org_id, name=changes["name"])
    flagged = evaluation.noticed_running(session, org_id=org_id, policy=policy)
    before = {field: getattr(policy, field) for field in ("name", "category", "severity")}
    after = before | {field: value for field, value in changes.items() if field in before}
    text = restated(changes.get("rule_text", policy.rule_text), before, after)
    if text != policy.rule_text:
        changes["rule_text"] = text
    for field, value in changes.items():
        setattr(policy, field, value)
    policy.version += 1
    policy.versions.insert(0, _snapshot(policy, change_request))
    session.flush()
    states.refresh_org(session, org_id=org_id)
    found = evaluation.noticed_running(session, org_id=org_id, policy=policy)
    evaluation.announce_new_in_running(
        session, org_id=org_id, before=flagged, after=found, cause="policySaved"
    )
    return policy


def delete_policy(
    session: Session, *, org_id: str, policy_id: str, change_request: ChangeRequestRef | None = None
) -> PolicyRow:
    policy = get_policy(session, org_id=org_id, policy_id=policy_id)
    if change_request is None:
        require_review_of_policies(session, org_id=org_id)
    session.delete(policy)
    session.flush()
    states.refresh_org(session, org_id=org_id)
    return policy


def require_review_of_policies(
    session: Session, *, org_id: str, payload: str = "this request's body"
) -> None:
    """The rule that sends a policy's change to review: the organization requires approval of them."""
    if session.scalar(select(OrganizationRow.policy_approval_required).where(OrganizationRow.id == org_id)):
        raise ApprovalRequired(
            rule="This organization requires approval of new policies and policy changes",
            kind="policy",
            field="orgSlug",
            payload=payload,
        )


def _custom_target(
    session: Session, *, org_id: str, request: GeneratePolicyPrompt, cipher: Cipher
) -> DraftingTarget:
    if request.provider_id is None:
        raise InvalidInput(
            "providerSource custom needs providerId: the id of one of the organization's provider "
            "connections (GET /providers)",
            field="providerId",
        )
    if request.system_model_key is not None:
        raise InvalidInput("systemModelKey applies to providerSource system only", field="systemModelKey")
    endpoint = providers.endpoint_for(
        session, org_id=org_id, provider_id=request.provider_id, model_id=request.model_id, cipher=cipher
    )
    drafted_with = DraftingModel(
        source="custom",
        kind=endpoint.kind,
        name=endpoint.name,
        model=endpoint.model,
        provider_id=request.provider_id,
    )
    return DraftingTarget(drafted_with=drafted_with, endpoint=endpoint)


def _system_target(key: str, settings: Settings) -> DraftingTarget:
    if key == BUILTIN_DRAFTER_KEY:
        builtin = DraftingModel(
            source="system",
            kind=BUILTIN_KIND,
            name="Built-in template drafter",
            model=BUILTIN_DRAFTER_KEY,
            system_model_key=BUILTIN_DRAFTER_KEY,
        )
        return DraftingTarget(drafted_with=builtin)
    endpoint = providers.system_model_endpoint(key, settings, also_known=(BUILTIN_DRAFTER_KEY,))
    drafted_with = DraftingModel(
        source="system", kind=endpoint.kind, name=key, model=endpoint.model, system_model_key=key
    )
    return DraftingTarget(drafted_with=drafted_with, endpoint=endpoint, operator_configured=True)


def _ask(target: DraftingTarget, *, prompt: str, settings: Settings) -> Completion:
    assert target.endpoint is not None
    return providers.ask_model(
        target.endpoint,
        operator_configured=target.operator_configured,
        settings=settings,
        system=SYSTEM_PROMPT,
        prompt=prompt,
        max_tokens=DRAFT_MAX_TOKENS,
    )


def _stored(value: Any) -> Any:
    """A request's value as the row keeps it: records and lists of them as their wire JSON."""
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value


def _snapshot(policy: PolicyRow, change_request: ChangeRequestRef | None) -> PolicyVersionRow:
    return PolicyVersionRow(
        version=policy.version,
        change_request=change_request,
        **{field: getattr(policy, field) for field in VERSIONED_FIELDS},
    )


def _refuse_duplicate_name(session: Session, *, org_id: str, name: str) -> None:
    taken = session.scalar(select(PolicyRow.id).where(PolicyRow.org_id == org_id, PolicyRow.name == name))
    if taken is not None:
        raise AlreadyExists(f"A policy named '{name}' already exists", field="name")


def test_saved(session: Session, policy: PolicyRow) -> PolicyTestResult:
    """A saved policy's examples as they run now, and what it flags of what runs."""
    results = tested(policy.check, policy.message, policy.examples)
    flagged = evaluation.impact(session, org_id=policy.org_id, policy=policy) if policy.check else []
    return PolicyTestResult(examples=results, passed=_all_passed(results), impact=flagged)


def test_unsaved(session: Session, *, org_id: str, request: TestPolicyCheck) -> PolicyTestResult:
    """An unsaved check's examples and what it would flag of what runs now; nothing is saved."""
    examples = [example.model_dump(mode="json", by_alias=True) for example in request.examples]
    results = tested(request.check, request.message, examples)
    # Never added to the session: a policy as it would be saved, for evaluation only.
    draft = PolicyRow(
        id="",
        org_id=org_id,
        name="(unsaved)",
        version=0,
        enforcement="audit",
        check=request.check,
        message=request.message,
        scope=request.scope.model_dump(mode="json", by_alias=True),
    )
    flagged = evaluation.impact(session, org_id=org_id, policy=draft)
    return PolicyTestResult(examples=results, passed=_all_passed(results), impact=flagged)


def _all_passed(results: list[ExampleResult]) -> bool:
    return bool(results) and all(result.passed for result in results)
