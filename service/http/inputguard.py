"""Refuse, before any route sees it, input that no database stores and no client means to send.

Text holding the NUL character (PostgreSQL cannot store it; SQLite would keep it silently) or a
lone UTF-16 surrogate (not Unicode text: no driver can encode it), numbers JSON does not have
(`NaN`, `Infinity`) and numbers beyond a double's range (`1e999`, which Python's parser turns into
floats the databases store as null or refuse, and integers of hundreds or thousands of digits, which
no client means either), bodies that are not UTF-8 and bodies nested absurdly deep: each is a 400
that names where it was found (the path, a query parameter, a field of the body), and nothing runs.

The guard is the one reader of a request's body: it reads it once, parses it once when it is
JSON (with `read_json`, which no number can make raise), and leaves both in the request's scope
(`request_body`) for the Idempotency-Key's fingerprint and the route's own parsing.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Message, Receive, Scope, Send

from service.http.errors import send_error

# Deeper than any configuration a person writes; far below where Python's parser gives up.
MAX_DEPTH = 64
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")
BODY_KEY = "orgdeck.body"
# A body whose JSON value the guard did not read: not sent as JSON, or not valid JSON (whose
# syntax error the route's parser tells with its position).
UNREAD = object()


@dataclass(frozen=True)
class Body:
    """A request's body as the guard read it: its bytes, and its JSON value (or UNREAD)."""

    raw: bytes
    value: Any = UNREAD


def request_body(scope: Scope) -> Body | None:
    """The body the guard read, None for a request that has none (GET, DELETE)."""
    return scope.get(BODY_KEY)


class Refusal(Exception):
    def __init__(self, field: str | None, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.field, self.message, self.code = field, message, code

    async def send(self, send: Send) -> None:
        prefix = "Malformed JSON body" if self.code == "malformed_json" else "Invalid request"
        where = f"{self.field}: " if self.field else ""
        details = [{"field": self.field, "message": self.message, "type": self.code}]
        await send_error(send, 400, f"{prefix}: {where}{self.message}", self.code, details=details)


async def guarded_receive(
    scope: Scope, headers: Mapping[bytes, bytes], receive: Receive, list_parameters: frozenset[str]
) -> Receive | None:
    """Raise Refusal for input no route should see; else the receive the app reads the body from
    (None: the client went away). `list_parameters`: the query parameters some route takes as a
    list, the only ones that may be repeated (any other given twice is ambiguous: which one did the
    caller mean?)."""
    check_url(scope["path"], scope["query_string"], list_parameters)
    if scope["method"] not in BODY_METHODS:
        return receive
    raw = await _read_body(receive)
    if raw is None:
        return None
    value = check_json_body(raw) if _is_json(headers.get(b"content-type")) else UNREAD
    scope[BODY_KEY] = Body(raw, value)
    return _replay(raw, receive)


def check_url(path: str, query_string: bytes, list_parameters: frozenset[str]) -> None:
    if "\x00" in path:
        raise Refusal("path", _describe("\x00"))
    if not query_string:
        return
    seen: set[str] = set()
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            raise Refusal(name.replace("\x00", "\\u0000"), _describe("\x00"))
        if name in seen and name not in list_parameters:
            raise Refusal(name, "is given more than once; send it once")
        seen.add(name)


def check_json_body(body: bytes) -> Any:
    """The body's JSON value; Refusal for a body that is JSON in name but not in substance. A syntax
    error is left to the route's own parser, whose message gives the position (UNREAD)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(
            None, f"not UTF-8 text (invalid byte at position {exc.start})", "malformed_json"
        ) from exc
    try:
        value = read_json(text)
    except json.JSONDecodeError:
        return UNREAD
    except RecursionError as exc:
        raise Refusal(None, f"nested deeper than {MAX_DEPTH} levels", "malformed_json") from exc
    _check_value(value, "", 0)
    return value


def _check_value(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Refusal(where or None, f"nested deeper than {MAX_DEPTH} levels", "malformed_json")
    if isinstance(value, str):
        found = _NOT_TEXT.search(value)
        if found:
            raise Refusal(where or None, _describe(found.group()))
    elif isinstance(value, int | float):
        if not _is_double(value):
            message = "is not a JSON number (NaN, Infinity and numbers beyond a double's range are not)"
            raise Refusal(where or None, message, "malformed_json")
    elif isinstance(value, dict):
        for key, item in value.items():
            field = f"{where}.{key}" if where else key
            found = _NOT_TEXT.search(key)
            if found:
                raise Refusal(field.encode("utf-8", "backslashreplace").decode(), _describe(found.group()))
            _check_value(item, field, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{where}.{index}" if where else str(index), depth + 1)


def read_json(text: str | bytes) -> Any:
    """A JSON document as Python values; a syntax error is a JSONDecodeError, and no number raises
    anything. Python refuses to read an integer of more than 4300 digits (a ValueError that would be
    a 500): such a literal is read as the double it would be, an infinity, which the guard refuses."""
    return json.loads(text, parse_int=_integer)


def _integer(literal: str) -> int | float:
    try:
        return int(literal)
    except ValueError:  # past Python's limit on digits, and so far past a double's range
        return float(literal)


def _is_double(number: int | float) -> bool:
    """Whether a double holds the number: a float must be finite, an int within its range."""
    if isinstance(number, float):
        return math.isfinite(number)
    return abs(number) <= sys.float_info.max


def _describe(character: str) -> str:
    if character == "\x00":
        return "cannot contain the NUL character (\\u0000)"
    return f"is not valid Unicode text (a lone surrogate \\u{ord(character):04x})"


def _is_json(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    media_type = content_type.split(b";", 1)[0].strip().lower()
    return media_type == b"application/json" or (
        media_type.startswith(b"application/") and media_type.endswith(b"+json")
    )


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the body read here to the app, then waits on the real one (for a
    disconnect) as the app would have."""
    sent = False

    async def replaying_receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replaying_receive
