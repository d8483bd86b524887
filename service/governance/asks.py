"""The common asks the built-in drafter recognises in an author's plain words, each turned into a
CEL condition over `{agent, environment, deployment}` with a rule line and sample inputs.

An instruction is read clause by clause ("production agents must not use gpt-3.5 and must keep
temperature ≤ 0.3" is two clauses); each matcher below is small and looks for one kind of ask:

- models and providers, allowed ("only gpt-4o or claude-3-5-sonnet", "only use azure") or denied
  ("must not use gpt-3.5"); a model name also covers its suffixed versions (gpt-3.5 covers
  gpt-3.5-turbo);
- a temperature cap and a max-token cap ("temperature ≤ 0.3", "max tokens at most 4096");
- tools denied ("must not use the shell.exec tool");
- tags required or forbidden ("must be tagged owner", "must not be tagged experimental");
- the environments the rule speaks of ("production agents …", "in protected environments").

Docs: docs/reference.md, "Drafting checks".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from api.governance import EnvironmentScope

Sample = dict[str, Any]

# Provider words as authors write them, longest first, and the provider kind an agent names.
PROVIDER_WORDS = {
    "azure openai": "azure_openai",
    "azure_openai": "azure_openai",
    "azure": "azure_openai",
    "openai-compatible": "openai_compatible",
    "openai compatible": "openai_compatible",
    "openai_compatible": "openai_compatible",
    "openai": "openai",
    "anthropic": "anthropic",
}
# Stand-ins for a sample agent that must use something the rule does not allow (or deny).
OTHER_MODELS = ("gpt-4o", "claude-3-5-sonnet", "gpt-3.5-turbo", "llama3.1:8b")
OTHER_PROVIDERS = ("openai", "anthropic", "azure_openai", "openai_compatible")
# Environment words recognised without the word "environment" after them.
ENVIRONMENT_WORDS = ("production", "prod", "staging", "development", "dev", "qa", "uat", "sandbox")
# Words before "environment(s)" that are not its name.
NOT_ENVIRONMENT_NAMES = {
    *("all", "any", "every", "each", "the", "an", "other", "its", "their", "this", "that", "which"),
    *("same", "new", "target", "protected", "unprotected", "one"),
}
# Words that follow "tagged" or "tags" without being a tag ("agents with tags must …").
NOT_TAGS = {"must", "should", "shall", "may", "will", "can", "are", "is", "be", "and", "or", "that"}
NOT_TAGS |= {"the", "a", "an", "to", "of", "in", "on", "with", "for", "by", "as"}

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]+")
_AND_THEN = re.compile(
    r",?\s+\b(?:and|but)\b\s+(?=(?:must|should|shall|may|never|only|always|keep|have|has|be|are|is|"
    r"use|not|cannot|can't|don't|do)\b)",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|never|no|don't|doesn't|cannot|can't|mustn't|shouldn't|forbid|forbidden|disallow|"
    r"disallowed|ban|banned|prohibit|prohibited|avoid)\b"
)
_MODEL = re.compile(
    r"\b(?:gpt|o[1-9]|claude|gemini|llama|mistral|mixtral|codestral|qwen|deepseek|phi-?\d|grok|command-r)"
    r"(?:[-.:]?[a-z0-9]+)*"
)
_PROVIDER = re.compile(r"\b(?:" + "|".join(re.escape(word) for word in PROVIDER_WORDS) + r")\b")
_DOTTED_NAME = re.compile(r"(?<![\w.-])[a-z0-9_-]*[a-z_][a-z0-9_-]*\.[a-z_][a-z0-9._-]*[a-z0-9_]")
# A clause speaks of tools with these words; a dotted name elsewhere may be a domain ("example.com").
_TOOL_WORDS = re.compile(r"\b(?:tools?|call|calls|calling|invoke|invokes|invoking)\b")
# Beside the word "tool", a key with "_" or "-" in it; any quoted name in a clause about tools.
# Before the plural ("third-party tools", "built-in tools") such a word says what kind of tools.
_NAMED_TOOL = re.compile(
    r"\btools?\s+([a-z0-9][a-z0-9_-]*[_-][a-z0-9_-]*[a-z0-9])|([a-z0-9][a-z0-9_-]*[_-][a-z0-9_-]*[a-z0-9])\s+tool\b"
)
_QUOTED = re.compile(r"[`'\"]([a-z0-9][a-z0-9._-]*)[`'\"]")
_TAGS = re.compile(
    r"\b(?:tagged(?:\s+with)?|(?:the\s+)?tags?|labell?ed(?:\s+with)?)\s+"
    r"(?P<tags>[`'\"]?[a-z0-9][a-z0-9_.:/-]*[`'\"]?(?:(?:\s*,\s*|\s+and\s+|\s*,\s*and\s+)[`'\"]?"
    r"[a-z0-9][a-z0-9_.:/-]*[`'\"]?)*)"
)
_TEMPERATURE = re.compile(
    r"(?P<before>\b(?:max(?:imum)?|highest)\s+)?\btemperature\b(?P<gap>[^0-9]{0,40}?)"
    r"(?P<number>\d+(?:\.\d+)?)(?P<after>\s+or\s+(?:less|lower|below))?"
)
_MAX_TOKENS = re.compile(
    r"(?:(?P<before>\bmax(?:imum)?)[\s_-]*|\b)(?:output\s+)?tokens?\b(?P<gap>[^0-9]{0,40}?)"
    r"(?P<number>\d[\d,_]*)(?P<after>\s+or\s+(?:less|fewer|lower|below))?"
)
_TOKENS_AFTER_NUMBER = re.compile(
    r"(?P<gap>\b(?:at most|no more than|up to|not more than|under|below|fewer than|less than|"
    r"maximum of|max(?:imum)?|cap(?:ped)? (?:at|of))\s+)(?P<number>\d[\d,_]*)\s+(?:output\s+)?tokens\b"
)
_AT_MOST = re.compile(
    r"≤|<=|=<|\bat most\b|\bno more than\b|\bnot more than\b|\bnot (?:above|over|exceed)|\bexceed\b|"
    r"\bup to\b|\bmax(?:imum)?\b|\bcap(?:ped)?\b|\blimit(?:ed)?\b|\bno (?:higher|greater) than\b"
)
_BELOW = re.compile(r"<|\bbelow\b|\bunder\b|\bless than\b|\blower than\b|\bfewer than\b")
_ENVIRONMENT = re.compile(
    r"\b(?P<word>" + "|".join(ENVIRONMENT_WORDS) + r")\b|\b(?P<named>[a-z0-9][a-z0-9_-]*)\s+environments?\b"
)
_PROTECTED = re.compile(r"\bprotected\s+environments?\b")


@dataclass(frozen=True)
class Requirement:
    """One recognised ask: the rule line, the CEL condition (true when the agent complies) and how a
    sample agent is made to comply with it or to break it."""

    statement: str
    # Never with a top-level || : conditions are joined with && as they are.
    condition: str
    comply: Callable[[Sample], None]
    violate: Callable[[Sample], None]
    # The failing example's name: what the violating sample does.
    violation: str
    # Where it holds when the instructions set different rules for different environments.
    environments: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recognised:
    requirements: list[Requirement]
    # Clauses in which no ask was recognised, as the author wrote them.
    unrecognised: list[str]
    environments: EnvironmentScope


def recognise(instructions: str) -> Recognised:
    """The asks recognised in the instructions, clause by clause, and the environments they name.

    Where clauses name different environments ("production agents only use azure; staging agents
    only use openai"), or some name one and others none, each ask holds in its own environments
    only; otherwise the scope says where the whole policy applies and the asks need not."""
    recognised = [
        (clause, named, _requirements_in(clause.lower())) for clause, named in _clauses(instructions)
    ]
    spoken_of = {tuple(named) for _, named, found in recognised if found}
    per_environment = len(spoken_of) > 1
    requirements = [
        _only_in(requirement, named) if per_environment and named else requirement
        for _, named, found in recognised
        for requirement in found
    ]
    unrecognised = [clause for clause, _, found in recognised if not found]
    # An ask that names no environment, beside asks that do, holds in every environment.
    scope = EnvironmentScope() if per_environment and () in spoken_of else environments_named(instructions)
    return Recognised(_distinct(requirements), unrecognised, scope)


def environments_named(instructions: str) -> EnvironmentScope:
    """The environments the instructions speak of: "production agents …" → [production]."""
    text = instructions.lower()
    if _PROTECTED.search(text):
        return EnvironmentScope(match="protected")
    names = _names_in(text)
    return EnvironmentScope(match="names", names=names) if names else EnvironmentScope()


def condition_of(requirements: list[Requirement]) -> str | None:
    """One check holding every requirement: their conditions joined with &&."""
    return " && ".join(r.condition for r in requirements) or None


def _clauses(text: str) -> list[tuple[str, list[str]]]:
    """Each clause with the environments it speaks of: those it names, else those named earlier in
    its sentence ("production agents only use azure and must keep temperature ≤ 0.3": both)."""
    clauses = []
    for sentence in _SENTENCE_END.split(text):
        named: list[str] = []
        for part in _AND_THEN.split(sentence):
            clause = part.strip(" ,-*•\t")
            if any(c.isalnum() for c in clause):
                named = _names_in(clause.lower()) or named
                clauses.append((clause, named))
    return clauses


def _names_in(text: str) -> list[str]:
    found = (match["word"] or match["named"] for match in _ENVIRONMENT.finditer(text))
    return _unique(name for name in found if name not in NOT_ENVIRONMENT_NAMES)


def _only_in(requirement: Requirement, names: list[str]) -> Requirement:
    """The requirement holding in the named environments only."""
    return replace(
        requirement,
        statement=f"In {_said(names, 'and')}: {requirement.statement}",
        condition=f"(!(environment.name in {_cel_list(names)}) || {requirement.condition})",
        environments=tuple(names),
    )


def _requirements_in(clause: str) -> list[Requirement]:
    forbids = bool(_NEGATION.search(clause))
    found = [_temperature_cap(clause), _max_tokens_cap(clause), _tags(clause, forbids)]
    if "temperature" not in clause and not re.search(r"\btokens?\b", clause):
        found += [_models(clause, forbids), _providers(clause, forbids), _tools(clause, forbids)]
    return [requirement for requirement in found if requirement is not None]


def _distinct(requirements: list[Requirement]) -> list[Requirement]:
    seen: set[str] = set()
    return [r for r in requirements if not (r.condition in seen or seen.add(r.condition))]


# -- models and providers -----------------------------------------------------------------


def _models(clause: str, forbids: bool) -> Requirement | None:
    names = _unique(found.group().rstrip(".-:") for found in _MODEL.finditer(clause))
    if not names:
        return None
    covers = _model_covered(names)
    said = _said(names)
    if forbids:
        return Requirement(
            statement=f"MUST NOT use the model {said} (or a version of it).",
            condition=f"!{covers}",
            comply=lambda sample: _set_model(sample, _first_not_covered(OTHER_MODELS, names, sample)),
            violate=lambda sample: _set_model(sample, names[0]),
            violation=f"uses {names[0]}",
        )
    other = _first_not_covered(OTHER_MODELS, names, None)
    return Requirement(
        statement=f"MUST use only the model {said} (or a version of it).",
        condition=covers,
        comply=lambda sample: (
            None if _covered(sample["agent"]["model"], names) else _set_model(sample, names[0])
        ),
        violate=lambda sample: _set_model(sample, other),
        violation=f"uses {other}",
    )


def _providers(clause: str, forbids: bool) -> Requirement | None:
    kinds = _unique(PROVIDER_WORDS[found.group()] for found in _PROVIDER.finditer(clause))
    if not kinds:
        return None
    listed = _cel_list(kinds)
    said = _said(kinds)
    if forbids:
        allowed = next(kind for kind in OTHER_PROVIDERS if kind not in kinds)
        return Requirement(
            statement=f"MUST NOT use the provider {said}.",
            condition=f"!(agent.provider in {listed})",
            comply=lambda sample: _set_provider(sample, allowed, unless=kinds, forbidden=True),
            violate=lambda sample: _set_provider(sample, kinds[0]),
            violation=f"uses the provider {kinds[0]}",
        )
    other = next(kind for kind in OTHER_PROVIDERS if kind not in kinds)
    return Requirement(
        statement=f"MUST use only the provider {said}.",
        condition=f"agent.provider in {listed}",
        comply=lambda sample: _set_provider(sample, kinds[0], unless=kinds, forbidden=False),
        violate=lambda sample: _set_provider(sample, other),
        violation=f"uses the provider {other}",
    )


def _model_covered(names: list[str]) -> str:
    """The CEL condition that the agent's model is one of the names or a version of one."""
    if len(names) == 1:
        return f'(agent.model == "{names[0]}" || agent.model.startsWith("{names[0]}-"))'
    return f'{_cel_list(names)}.exists(m, agent.model == m || agent.model.startsWith(m + "-"))'


def _covered(model: str, names: list[str]) -> bool:
    return any(model == name or model.startswith(f"{name}-") for name in names)


def _first_not_covered(candidates: tuple[str, ...], names: list[str], sample: Sample | None) -> str:
    if sample is not None and not _covered(sample["agent"]["model"], names):
        return sample["agent"]["model"]
    return next(model for model in candidates if not _covered(model, names))


def _set_model(sample: Sample, model: str) -> None:
    sample["agent"]["model"] = model
    sample["agent"]["providerConfig"]["model"] = model


def _set_provider(
    sample: Sample, kind: str, *, unless: list[str] | None = None, forbidden: bool = False
) -> None:
    """Set the provider; with `unless`, only when the current one breaks the rule."""
    if unless is not None and (sample["agent"]["provider"] in unless) != forbidden:
        return
    sample["agent"]["provider"] = kind


# -- caps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cap:
    limit: int | float
    # Strictly below the limit ("under 0.5") rather than at most ("≤ 0.5").
    strict: bool


def _cap(found: re.Match[str]) -> Cap | None:
    """The cap a match says: the words between the setting and the number decide first ("max
    tokens under 4000" is strict), then "max …" before it or "… or less" after it."""
    groups = found.groupdict()
    number = found["number"].replace(",", "").replace("_", "")
    limit = float(number) if "." in number else int(number)
    if _AT_MOST.search(found["gap"]):
        return Cap(limit, strict=False)
    if _BELOW.search(found["gap"]):
        return Cap(limit, strict=True)
    if groups.get("before") or groups.get("after"):
        return Cap(limit, strict=False)
    return None


def _temperature_cap(clause: str) -> Requirement | None:
    found = _TEMPERATURE.search(clause)
    cap = _cap(found) if found else None
    if cap is None:
        return None
    return _capped_setting("temperature", "temperature", cap, exceeding=round(max(cap.limit + 0.5, 0.9), 2))


def _max_tokens_cap(clause: str) -> Requirement | None:
    found = _MAX_TOKENS.search(clause) or _TOKENS_AFTER_NUMBER.search(clause)
    cap = _cap(found) if found else None
    if cap is None:
        return None
    return _capped_setting("max_tokens", "max tokens", cap, exceeding=int(cap.limit) * 2)


def _capped_setting(key: str, words: str, cap: Cap, *, exceeding: float) -> Requirement:
    """A provider config setting kept at or below a limit. A missing setting breaks the rule: the
    provider's own default (temperature 1, no output limit) is what a cap is written against."""
    limit = cap.limit
    operator, said = ("<", f"below {limit}") if cap.strict else ("<=", f"at or below {limit}")
    # A value the sample may keep: the limit itself, or just under it when the cap is strict.
    within = limit if not cap.strict else limit / 2 if isinstance(limit, float) else limit - 1

    def comply(sample: Sample) -> None:
        current = sample["agent"]["providerConfig"].get(key)
        if current is None or current > within:
            sample["agent"]["providerConfig"][key] = within

    def violate(sample: Sample) -> None:
        sample["agent"]["providerConfig"][key] = exceeding

    return Requirement(
        statement=f"MUST keep {words} {said}.",
        condition=f"has(agent.providerConfig.{key}) && agent.providerConfig.{key} {operator} {limit}",
        comply=comply,
        violate=violate,
        violation=f"{words} {exceeding}",
    )


# -- tools and tags -----------------------------------------------------------------------


def _tools(clause: str, forbids: bool) -> Requirement | None:
    if not forbids or not _TOOL_WORDS.search(clause):
        return None
    named = [a or b for a, b in _NAMED_TOOL.findall(clause)]
    dotted = [found.group() for found in _DOTTED_NAME.finditer(clause)]
    refs = _unique([*dotted, *named, *_QUOTED.findall(clause)])
    if not refs:
        return None
    listed = _cel_list(refs)

    def comply(sample: Sample) -> None:
        sample["agent"]["tools"] = [tool for tool in sample["agent"]["tools"] if tool["ref"] not in refs]

    def violate(sample: Sample) -> None:
        sample["agent"]["tools"].append({"ref": refs[0]})

    return Requirement(
        statement=f"MUST NOT use the tool {_said(refs)}.",
        condition=f"!agent.tools.exists(t, t.ref in {listed})",
        comply=comply,
        violate=violate,
        violation=f"uses the tool {refs[0]}",
    )


def _tags(clause: str, forbids: bool) -> Requirement | None:
    found = _TAGS.search(clause)
    if found is None:
        return None
    listed = (tag.strip("`'\"") for tag in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", found["tags"]))
    tags = _unique(tag for tag in listed if tag not in NOT_TAGS)
    if not tags:
        return None
    # "owner" is met by "owner" or "owner:<anything>": tags often carry a value.
    carries = [f'agent.tags.exists(t, t == "{tag}" || t.startsWith("{tag}:"))' for tag in tags]

    def carry(sample: Sample) -> None:
        sample["agent"]["tags"] += [tag for tag in tags if tag not in sample["agent"]["tags"]]

    def drop(sample: Sample) -> None:
        sample["agent"]["tags"] = [t for t in sample["agent"]["tags"] if not _tagged(t, tags)]

    if forbids:
        return Requirement(
            statement=f"MUST NOT be tagged {_said(tags, 'or')}.",
            condition=" && ".join(f"!{c}" for c in carries),
            comply=drop,
            violate=lambda sample: sample["agent"]["tags"].append(tags[0]),
            violation=f"tagged {tags[0]}",
        )
    return Requirement(
        statement=f"MUST be tagged {_said(tags, 'and')}.",
        condition=" && ".join(carries),
        comply=carry,
        violate=drop,
        violation=f"not tagged {tags[0]}",
    )


def _tagged(tag: str, tags: list[str]) -> bool:
    return any(tag == wanted or tag.startswith(f"{wanted}:") for wanted in tags)


# -- words --------------------------------------------------------------------------------


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))


def _cel_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def _said(items: list[str], joiner: str = "or") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {joiner} {items[-1]}"
