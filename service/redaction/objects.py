"""Credentials in free-form objects, kept from everyone who reads them: one rule for every place such
an object is shown (previews and diffs, the status matrix, the audit trail, events and the
notifications made of them, the records of agents, versions, tools and artifacts, change requests,
job results, log lines).

A free-form object (an agent's providerConfig, a deployment's agentProviderConfig, a tool's
inputSchema and toolProviderConfig, an artifact's metadata, a change request's payload) has no
schema saying which of its values are secret, so its keys say it: whatever a key named like a
credential holds (`apiKey`, `token`, `client_secret`, `Authorization`, `password`…, compared with
case and separators removed, so `api_key`, `apiKey` and `API-KEY` are alike and `maxTokens` is
not) is shown as `[redacted]`, at any depth. Only what is shown is redacted: what is stored keeps
the real values, for what needs them (a webhook target's manifest, a provider call).

Readers edit what they were shown, so the placeholder comes back: a write that sends `[redacted]`
under a credential-named key keeps the value stored at that place (`restored`), so that an edit
form can never replace a credential with its placeholder.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from service.errors import InvalidInput

REDACTED = "[redacted]"

# Key names (letters only, lowercase) that hold a credential: containing one of the parts, or being
# one of the keys (`token` alone, not `maxTokens`).
SENSITIVE_KEY_PARTS = (
    "secret",
    "password",
    "passwd",
    "apikey",
    "credential",
    "privatekey",
    "accesstoken",
    "authtoken",
)
SENSITIVE_KEYS = frozenset({"token", "auth", "authorization"})

# A hidden value is taken out of a message that quotes it only from this length on: replacing
# every "1" in a message would hide the message, not the value.
MIN_HIDDEN_LENGTH = 4

# `key: value` and `key=value` in text: JSON, a Python repr, a query or a header line. A value is a
# quoted string (its quotes escaped too, as in JSON inside a string), an object or a list holding
# none (a deeper one is left to the keys inside it), or a bare word after an optional
# authorization scheme.
_PAIR = re.compile(
    r"(?P<key>[A-Za-z_][\w.-]*)"
    r"(?P<between>\\?[\"']?\s*[:=]\s*)"
    r"(?P<value>(?P<quote>\\?[\"'])(?:\\.|(?!(?P=quote)).)*?(?P=quote)"
    r"|\{[^{}]*\}|\[[^\[\]]*\]"
    r"|(?:(?:Bearer|Basic|Digest|Token)\s+)?[^\s\"'{}\[\](),;&]+)"
)


@functools.lru_cache(maxsize=4096)
def sensitive(key: str) -> bool:
    """Whether a value under `key` is a credential."""
    letters = re.sub(r"[^a-z]", "", key.lower())
    return letters in SENSITIVE_KEYS or any(part in letters for part in SENSITIVE_KEY_PARTS)


def redacted(value: Any) -> Any:
    """`value` as a reader sees it: what every credential-named key holds replaced, all the way down."""
    if isinstance(value, dict):
        return {key: shown(key, item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def shown(key: str, value: Any) -> Any:
    """What a reader sees of `value`, found under `key` (an absent value stays absent)."""
    return REDACTED if value is not None and sensitive(key) else redacted(value)


def restored(sent: Any, stored: Any, *, field: str) -> Any:
    """`sent` with each `[redacted]` under a credential-named key replaced by what `stored` holds at
    the same place (keys and list positions); 400 naming the place where nothing is stored, as the
    placeholder would otherwise become the credential."""
    if isinstance(sent, dict):
        kept = stored if isinstance(stored, dict) else {}
        return {
            key: _restored_item(key, item, kept.get(key), field=f"{field}.{key}")
            for key, item in sent.items()
        }
    if isinstance(sent, list):
        kept_items = stored if isinstance(stored, list) else []
        return [
            restored(item, kept_items[index] if index < len(kept_items) else None, field=f"{field}.{index}")
            for index, item in enumerate(sent)
        ]
    return sent


def _restored_item(key: str, item: Any, stored: Any, *, field: str) -> Any:
    if item != REDACTED or not sensitive(key):
        return restored(item, stored, field=field)
    if stored is None:
        raise InvalidInput(
            f"{field} is {REDACTED}, the placeholder of a hidden value, and no value is stored there "
            "to keep: send the value itself",
            field=field,
        )
    return stored


def hidden_values(value: Any) -> set[str]:
    """Every value `redacted(value)` hides, as text: what to take out of a message that may quote it."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found |= _texts(item) if sensitive(key) else hidden_values(item)
    elif isinstance(value, list):
        for item in value:
            found |= hidden_values(item)
    return found


def _texts(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {text for item in value.values() for text in _texts(item)}
    if isinstance(value, list):
        return {text for item in value for text in _texts(item)}
    return {value if isinstance(value, str) else str(value)} if value is not None else set()


def redacted_text(text: str, hidden: Iterable[str] = ()) -> str:
    """`text` with the value of every credential-named `key: value` or `key=value` in it, and each
    of `hidden` at least MIN_HIDDEN_LENGTH long (longest first, so that no part of one is left),
    replaced by the placeholder."""
    text = _PAIR.sub(_pair_shown, text)
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= MIN_HIDDEN_LENGTH:
            text = text.replace(value, REDACTED)
    return text


def _pair_shown(match: re.Match[str]) -> str:
    key, between, value = match["key"], match["between"], match["value"]
    if not sensitive(key):
        return f"{key}{between}{_PAIR.sub(_pair_shown, value)}"  # pairs inside it: a JSON string, an object
    quote = match["quote"] or ""
    return f"{key}{between}{quote}{REDACTED}{quote}"
