"""HTTP caching of JSON answers: a strong ETag over the exact body, Cache-Control, and 304s."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pydantic import BaseModel
from starlette.responses import Response

ONE_YEAR_SECONDS = 365 * 24 * 3600


def cache_control(*, public: bool, max_age: int, immutable: bool = False) -> str:
    directives = ["public" if public else "private", f"max-age={max_age}"]
    if immutable:
        directives.append("immutable")
    return ", ".join(directives)


@dataclass(frozen=True)
class TaggedJson:
    """A JSON body and its strong ETag."""

    body: bytes
    etag: str


def tagged_json(record: BaseModel) -> TaggedJson:
    body = record.model_dump_json().encode()
    return TaggedJson(body, f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def cached_json(answer: TaggedJson, *, cache_control: str, if_none_match: str | None) -> Response:
    """The answer with its ETag, or an empty 304 when the caller already holds this body."""
    headers = {"ETag": answer.etag, "Cache-Control": cache_control}
    if if_none_match and _matches(if_none_match, answer.etag):
        return Response(status_code=304, headers=headers)
    return Response(answer.body, media_type="application/json", headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """If-None-Match uses weak comparison (RFC 9110 13.1.2): `W/` prefixes are ignored; `*` matches."""
    candidates = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in candidates or etag in candidates
