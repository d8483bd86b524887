"""What drafting asks a model, and the built-in drafter that answers without one.

Both produce the same structure, so that a rule reads the same whoever wrote it:

    Title: …
    Category: … · Severity: …
    Scope: …

    Rules:
    1. MUST …
    2. MUST NOT …

    Rationale: …
"""

from __future__ import annotations

import re

from api.governance import GeneratePolicyPrompt

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

SYSTEM_PROMPT = """You write governance policy rules for an organization's AI agents.
Write exactly one rule from the author's instructions. Answer with the rule text only, no preamble \
and no Markdown, in this structure:

Title: <a short title>
Category: <category> · Severity: <severity>
Scope: <what and whom the rule applies to>

Rules:
1. MUST <an obligation>
2. MUST NOT <a prohibition>
(as many numbered statements as the instructions need, each one testable, each starting with \
MUST or MUST NOT)

Rationale: <why the rule exists, in one or two sentences>"""

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
