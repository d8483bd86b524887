"""What drafting asks a model, and the built-in drafter that answers without one.

Both draft a rule text, a CEL check with its message, and examples the check is tested on before
the draft is answered (asks.py reads the common asks for the built-in drafter). The rule text has
the same structure whoever wrote it:

    Title: …
    Category: … · Severity: …
    Scope: …

    Rules:
    1. MUST …
    2. MUST NOT …

    Rationale: …
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from api.governance import (
    DEFAULT_ENFORCEMENT,
    Enforcement,
    EnvironmentScope,
    GeneratePolicyPrompt,
    PolicyExample,
    PolicyScope,
)
from service.governance.asks import Recognised, Sample, condition_of, environments_named, recognise
from service.governance.checks import CheckInvalid, on_examples, validate_message
from service.providers.adapters import Completion

DRAFT_MAX_TOKENS = 2048
TITLE_WORDS = 8
UNTITLED = "Untitled policy"

SEVERITY_MEANING = {
    "error": "error (a violation blocks the action)",
    "warning": "warning (a violation is reported; the action goes ahead)",
}
DEFAULT_SCOPE = {
    "security": "Every agent of the organization, the tools it calls and the data it handles.",
    "quality": "Every answer and action an agent of the organization produces.",
    "compliance": "Every agent of the organization that processes regulated data or records.",
    "identity": "Every agent of the organization and the identities, credentials and roles it uses.",
}
DEFAULT_RATIONALE = {
    "security": "Keeps the organization's systems and data safe from misuse and leaks.",
    "quality": "Keeps what agents produce correct, consistent and fit for its purpose.",
    "compliance": "Keeps the organization within the laws, contracts and standards it answers to.",
    "identity": "Keeps every action attributable to a known identity with only the access it needs.",
}

# The environment a sample agent is deployed to when the instructions name none.
SAMPLE_ENVIRONMENT = "production"
NOTHING_RECOGNISED = (
    "No check drafted: none of the common asks (allowed or denied models and providers, "
    "temperature and max-token caps, denied tools, required tags) was recognised in the "
    "instructions. Write the check by hand, or draft with a model."
)


def sample_input(environment: str = SAMPLE_ENVIRONMENT, *, protected: bool = True) -> Sample:
    """An agent as it would be deployed to an environment: the CEL input `{agent, environment,
    deployment}` the examples start from."""
    return {
        "agent": {
            "stableKey": "support-triage",
            "name": "Support triage",
            "provider": "openai",
            "model": "gpt-4o",
            "providerConfig": {"model": "gpt-4o", "temperature": 0.2, "max_tokens": 1024},
            "tags": ["support", "customer-facing"],
            "tools": [{"ref": "kb.search"}],
            "prompts": [{"name": "system", "reference": "acme/prompts/triage@production", "version": "3"}],
        },
        "environment": {"name": environment, "protected": protected, "target": "webhook"},
        "deployment": {"actor": "operator@example.com", "viaChangeRequest": False, "action": "deploy"},
    }


SYSTEM_PROMPT = f"""You write governance policies for an organization's AI agents: a rule in words \
and a check in CEL (Common Expression Language) that tests an agent about to be deployed.

Answer with one JSON object only, no Markdown, with these fields:
- "ruleText": the rule, in this structure:
  Title: <a short title>
  Category: <category> · Severity: <severity>
  Scope: <what and whom the rule applies to>

  Rules:
  1. MUST <an obligation>
  2. MUST NOT <a prohibition>
  (as many numbered statements as the instructions need, each one testable)

  Rationale: <why the rule exists, in one or two sentences>
- "check": a CEL expression that is true when the agent complies, over the input below (use \
has() before reading an optional providerConfig key);
- "message": what is wrong when the check is false, in words;
- "examples": at least two inputs shaped like the one below, each {{"name", "input", "expect"}} \
with "expect" "pass" (the check is true) or "fail"; at least one of each.

The input (an example):
{json.dumps(sample_input(), indent=2)}"""


# A statement that forbids, and the words that say so (removed when it becomes "MUST NOT …").
_PROHIBITION = re.compile(
    r"^(?:(?:agents?|they|you|we|it)\s+)?(?:must\s+not|must\s+never|mustn't|should\s+not|shouldn't|"
    r"shall\s+not|may\s+not|cannot|can\s+not|can't|do\s+not|don't|does\s+not|doesn't|never|avoid|"
    r"no\s+longer|refrain\s+from)\s+",
    re.IGNORECASE,
)
_OBLIGATION = re.compile(
    r"^(?:(?:agents?|they|you|we|it)\s+)?(?:must\s+always|must|should\s+always|should|shall|"
    r"has\s+to|have\s+to|needs?\s+to|always|ensure\s+that|make\s+sure\s+(?:that\s+)?|please)\s+",
    re.IGNORECASE,
)
_LEADING_NO = re.compile(r"^no\s+", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_TITLE_LINE = re.compile(r"^[ \t]*title[ \t]*:[ \t]*(\S.*)$", re.IGNORECASE | re.MULTILINE)
_HEADER_LINE = re.compile(
    r"^category:[ \t]*(?P<category>\w+)[ \t]*·[ \t]*severity:[ \t]*(?P<severity>\w+)\b.*$",
    re.IGNORECASE | re.MULTILINE,
)


def drafting_prompt(request: GeneratePolicyPrompt) -> str:
    """The user message of a drafting call: every field the author gave."""
    lines = [
        f"Category: {request.category}",
        f"Severity: {SEVERITY_MEANING[request.severity]}",
    ]
    if request.name:
        lines.append(f"Title to use: {request.name}")
    if request.description:
        lines.append(f"Description: {request.description}")
    lines += ["", "Instructions:", request.instructions]
    return "\n".join(lines)


def builtin_draft(request: GeneratePolicyPrompt) -> str:
    """The rule the built-in drafter writes: the same instructions always give the same text."""
    statements = [_statement(sentence) for sentence in _sentences(request.instructions)]
    numbered = [f"{number}. {text}" for number, text in enumerate(statements, start=1)]
    return "\n".join(
        [
            f"Title: {request.name or derived_title(request.instructions)}",
            f"Category: {request.category} · Severity: {SEVERITY_MEANING[request.severity]}",
            f"Scope: {DEFAULT_SCOPE[request.category]}",
            "",
            "Rules:",
            *numbered,
            "",
            f"Rationale: {request.description or DEFAULT_RATIONALE[request.category]}",
        ]
    )


@dataclass(frozen=True)
class CheckedDraft:
    """A draft with its check, tested on its examples before it is answered."""

    rule_text: str
    check: str | None = None
    message: str | None = None
    scope: PolicyScope = field(default_factory=PolicyScope)
    examples: list[PolicyExample] = field(default_factory=list)
    # Why the draft has no check, or what failed in the one it has.
    notice: str | None = None
    # Whether the examples ran as they expect (False also when there is no check to run).
    tested: bool = False

    def enforcement(self, severity: str) -> Enforcement | None:
        """What to enforce it with: by severity once its examples pass; audit while they fail (a
        policy whose examples fail cannot deny); nothing without a check."""
        if self.check is None:
            return None
        return DEFAULT_ENFORCEMENT[severity] if self.tested else "audit"


class DraftRejected(Exception):
    """A model's answer that is not a draft whose check compiles and whose examples pass."""

    def __init__(self, reason: str, draft: CheckedDraft | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        # What could be read of the answer, for the author to fix by hand.
        self.draft = draft


def builtin_checked_draft(request: GeneratePolicyPrompt) -> CheckedDraft:
    """The built-in drafter's draft: the common asks recognised in the instructions, one check
    holding them all (joined with &&), an example that complies and one breaking each ask."""
    recognised = recognise(request.instructions)
    scope = PolicyScope(environments=recognised.environments)
    check = condition_of(recognised.requirements)
    if check is None:
        return CheckedDraft(rule_text=builtin_draft(request), scope=scope, notice=NOTHING_RECOGNISED)
    statements = [r.statement for r in recognised.requirements]
    statements += [_statement(clause) for clause in recognised.unrecognised]
    examples = _examples(recognised)
    notice = None
    if recognised.unrecognised:
        unchecked = "; ".join(f"“{clause}”" for clause in recognised.unrecognised)
        notice = f"The check does not cover what no common ask was recognised in: {unchecked}."
    return CheckedDraft(
        rule_text=_rule_text(request, statements, recognised.environments),
        check=check,
        message=" ".join(_sentence(r.statement) for r in recognised.requirements),
        scope=scope,
        examples=examples,
        notice=notice,
        tested=not failing_examples(check, examples),
    )


def model_checked_draft(
    ask: Callable[[str], Completion], request: GeneratePolicyPrompt
) -> tuple[CheckedDraft, list[Completion]]:
    """Ask the model for a draft; one whose check does not compile or whose examples fail is asked
    for again once, with what failed. The second failure is answered as a draft with a notice."""
    prompt = drafting_prompt(request)
    scope = PolicyScope(environments=environments_named(request.instructions))
    answers = [ask(prompt)]
    try:
        return checked_answer(answers[0].text, scope), answers
    except DraftRejected as first:
        answers.append(ask(retry_prompt(prompt, answers[0].text, first.reason)))
    try:
        return checked_answer(answers[1].text, scope), answers
    except DraftRejected as second:
        draft = second.draft or CheckedDraft(rule_text=answers[1].text.strip(), scope=scope)
        notice = f"The model's draft was rejected twice; the second time: {second.reason}"
        return replace(draft, notice=notice), answers


def retry_prompt(prompt: str, answer: str, reason: str) -> str:
    return (
        f"{prompt}\n\nYour previous answer:\n{answer}\n\nIt was rejected: {reason}\n"
        "Answer again with the corrected JSON object only."
    )


def checked_answer(text: str, scope: PolicyScope) -> CheckedDraft:
    """The draft in a model's answer, once its check compiles and its examples pass."""
    fields = _json_object(text)
    rule_text = fields.get("ruleText")
    if not isinstance(rule_text, str) or not rule_text.strip():
        raise DraftRejected("ruleText is missing or empty")
    check, message = fields.get("check"), fields.get("message")
    try:
        examples = [PolicyExample.model_validate(example) for example in fields.get("examples") or []]
    except ValidationError as error:
        raise DraftRejected(
            f"an example is not {{name, input, expect: pass|fail}}: {error.errors()[0]['msg']}"
        ) from None
    if not isinstance(check, str) or not check.strip():
        raise DraftRejected(
            "check is missing or empty", CheckedDraft(rule_text=rule_text.strip(), scope=scope)
        )
    draft = CheckedDraft(
        rule_text=rule_text.strip(),
        check=check.strip(),
        message=message.strip() if isinstance(message, str) and message.strip() else None,
        scope=scope,
        examples=examples,
    )
    try:
        validate_message(draft.message)
        failures = failing_examples(draft.check, examples)
    except CheckInvalid as invalid:
        raise DraftRejected(f"{invalid.message} (the check does not compile)", draft) from None
    if {example.expect for example in examples} != {"pass", "fail"}:
        failures.append("the examples need at least one expected pass and one expected fail")
    if failures:
        raise DraftRejected("; ".join(failures), draft)
    return replace(draft, tested=True)


def failing_examples(check: str, examples: list[PolicyExample]) -> list[str]:
    """What went wrong with each example whose outcome is not the one it expects."""
    return [
        f"example '{example.name}' expects {example.expect} but the check gives "
        + (f"error ({result.error})" if result.outcome == "error" else result.outcome)
        for example, result in on_examples(check, examples)
        if result.outcome != example.expect
    ]


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object in an answer, tolerating a Markdown fence or words around it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DraftRejected("the answer is not a JSON object")
    try:
        fields = json.loads(text[start : end + 1])
    except json.JSONDecodeError as error:
        raise DraftRejected(f"the answer is not valid JSON: {error.msg} at character {error.pos}") from None
    if not isinstance(fields, dict):
        raise DraftRejected("the answer is not a JSON object")
    return fields


def _examples(recognised: Recognised) -> list[PolicyExample]:
    """An agent that complies, and one breaking each ask; in each environment named when the asks
    differ by environment."""
    scope = recognised.environments
    guarded = list(dict.fromkeys(name for r in recognised.requirements for name in r.environments))
    per_environment = bool(guarded)
    names = guarded or scope.names[:1] or [SAMPLE_ENVIRONMENT]
    examples = []
    for name in names:
        applying = [r for r in recognised.requirements if not r.environments or name in r.environments]
        complying = sample_input(name, protected=scope.match == "protected" or name == SAMPLE_ENVIRONMENT)
        for requirement in applying:
            requirement.comply(complying)
        where = f" in {name}" if per_environment else ""
        examples.append(PolicyExample(name=f"complies{where}", input=complying, expect="pass"))
        # An ask that holds everywhere breaks once, in the first environment.
        for requirement in applying:
            if requirement.environments or name == names[0]:
                breaking = copy.deepcopy(complying)
                requirement.violate(breaking)
                examples.append(
                    PolicyExample(name=f"{requirement.violation}{where}", input=breaking, expect="fail")
                )
    return examples


def _rule_text(request: GeneratePolicyPrompt, statements: list[str], environments: EnvironmentScope) -> str:
    numbered = [f"{number}. {text}" for number, text in enumerate(statements, start=1)]
    return "\n".join(
        [
            f"Title: {request.name or derived_title(request.instructions)}",
            f"Category: {request.category} · Severity: {SEVERITY_MEANING[request.severity]}",
            f"Scope: {_scope_words(environments, request.category)}",
            "",
            "Rules:",
            *numbered,
            "",
            f"Rationale: {request.description or DEFAULT_RATIONALE[request.category]}",
        ]
    )


def _sentence(statement: str) -> str:
    """A rule line as a message: "MUST NOT use …" → "Must not use …"."""
    return statement.replace("MUST NOT", "Must not", 1).replace("MUST", "Must", 1)


def _scope_words(environments: EnvironmentScope, category: str) -> str:
    if environments.match == "protected":
        return "Every agent deployed to a protected environment."
    if environments.match == "names":
        return f"Every agent deployed to {', '.join(environments.names)}."
    return DEFAULT_SCOPE[category]


def title_of(rule_text: str, request: GeneratePolicyPrompt) -> str:
    """The name a draft goes by: the author's, else the rule's own Title line, else one from the instructions."""
    if request.name:
        return request.name
    found = _TITLE_LINE.search(rule_text)
    return found.group(1).strip()[:200] if found else derived_title(request.instructions)


def headed(rule_text: str, fields: dict[str, str]) -> str:
    """The rule text with its Title line and its Category · Severity line, if it has them, stating
    `fields` (name, category, severity): a draft saved under another name or class than it was
    drafted with must not keep the draft's."""
    title = _TITLE_LINE.search(rule_text)
    header = _HEADER_LINE.search(rule_text)
    written = {
        "name": title.group(1).strip() if title else fields["name"],
        "category": header["category"] if header else fields["category"],
        "severity": header["severity"] if header else fields["severity"],
    }
    return restated(rule_text, written, fields)


def restated(rule_text: str, before: dict[str, str], after: dict[str, str]) -> str:
    """The rule text with its Title line and its Category · Severity line following a change of
    name, category or severity, where they still read what they were: a rename must not leave the
    old title in the text. Lines the author rewrote by hand are theirs and stay."""
    title = _TITLE_LINE.search(rule_text)
    if title and title.group(1).strip() == before["name"] and after["name"] != before["name"]:
        rule_text = rule_text[: title.start(1)] + after["name"] + rule_text[title.end(1) :]
    header = _HEADER_LINE.search(rule_text)
    classes = ("category", "severity")
    read_before = header and all(header[field] == before[field] for field in classes)
    if read_before and any(after[field] != before[field] for field in classes):
        line = f"Category: {after['category']} · Severity: {SEVERITY_MEANING[after['severity']]}"
        rule_text = rule_text[: header.start()] + line + rule_text[header.end() :]
    return rule_text


def derived_title(instructions: str) -> str:
    """The first statement, shortened: "Do not log customer PII", "Use TLS for outbound calls"."""
    forbids, action = _rule(_sentences(instructions)[0])
    words = (f"do not {action}" if forbids else action).split()
    if not words:
        return UNTITLED
    title = " ".join(words[:TITLE_WORDS]) + ("…" if len(words) > TITLE_WORDS else "")
    return title[:1].upper() + title[1:]


def _sentences(text: str) -> list[str]:
    parts = (_BULLET.sub("", part).strip() for part in _SENTENCE_END.split(text))
    # A part with no letter or digit ("?!", "—") says nothing a rule could hold.
    return [part for part in parts if any(c.isalnum() for c in part)] or [text.strip()]


def _statement(sentence: str) -> str:
    forbids, action = _rule(sentence)
    return f"{'MUST NOT' if forbids else 'MUST'} {action}."


def _rule(sentence: str) -> tuple[bool, str]:
    """Whether a sentence forbids, and what it is about."""
    forbids = bool(_PROHIBITION.match(sentence) or _LEADING_NO.match(sentence))
    action = _action(sentence).rstrip(".!?;")
    if _LEADING_NO.match(sentence) and not _PROHIBITION.match(sentence):
        action = f"allow {action}"  # "No secrets in logs." → "MUST NOT allow secrets in logs."
    return forbids, action


def _action(sentence: str) -> str:
    """The sentence without the words that made it an obligation or a prohibition."""
    for pattern in (_PROHIBITION, _OBLIGATION, _LEADING_NO):
        match = pattern.match(sentence)
        if match:
            sentence = sentence[match.end() :]
            break
    return sentence[:1].lower() + sentence[1:] if sentence[1:2].islower() else sentence
