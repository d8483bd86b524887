"""The base of every area's group of client operations (`client.api_keys`, `client.agents`, …)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from api.transport import Transport


class Resource:
    """A group of operations of one area, sharing the client's plumbing."""

    def __init__(self, client: Transport) -> None:
        self._client = client

    def _org(self, org_slug: str | None) -> str:
        return org_slug or self._client.org_slug


def body(shape: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """A request body in wire form, leaving out fields given as None.

    Not validated here: the service validates (one source of truth for the rules), so invalid
    input comes back as a BadRequest naming the field, exactly as for any other client.
    """
    given = {name: value for name, value in fields.items() if value is not None}
    return shape.model_construct(**given).model_dump(mode="json", by_alias=True, exclude_unset=True)
