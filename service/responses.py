"""Answers a route renders itself."""

from __future__ import annotations

from pydantic import BaseModel
from starlette.responses import Response


def rendered_json(body: str | BaseModel) -> Response:
    """JSON text (or a model validated once) sent as it is. Passed back through the route's
    response model, a page would be checked and converted again, in another trip through the
    thread pool: for a large page that costs more than its query."""
    text = body.model_dump_json() if isinstance(body, BaseModel) else body
    return Response(text, media_type="application/json")
