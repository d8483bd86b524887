"""What a PATCH request changes: the fields it was sent with, nothing else."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def patched_fields(request: BaseModel) -> dict[str, Any]:
    """The fields the request set, by attribute name, without the organization it names (a field
    sent as null is there, as null: the service decides what null means for it)."""
    return request.model_dump(exclude_unset=True, exclude={"org_slug"}, by_alias=False)
