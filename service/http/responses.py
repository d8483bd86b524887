"""Answers a route renders itself."""

from __future__ import annotations

import functools

from pydantic import BaseModel
from starlette.responses import Response


def rendered_json(body: str | BaseModel) -> Response:
    """JSON text (or a model validated once) sent as it is. Passed back through the route's
    response model, a page would be checked and converted again, in another trip through the
    thread pool: for a large page that costs more than its query."""
    text = body.model_dump_json() if isinstance(body, BaseModel) else body
    return Response(text, media_type="application/json")


def splice_json(frame: BaseModel, **rendered: str) -> str:
    """The frame's JSON with the named fields' values given as JSON text rendered elsewhere (by the
    database, or once per row), so large parts are never turned into models and back.

    Field-order contract: the spliced fields must be the frame model's first fields or its last
    fields, in the model's order. The answer is then exactly the text `model_dump_json()` would give
    for the whole model: the frame's other fields are dumped as usual and the spliced ones are put
    before or after them. Moving a spliced field into the middle of its model (or another field
    past it) breaks the contract, and this raises ValueError rather than answer fields in an order
    the schema does not state (tests/test_responses.py checks every spliced model).
    """
    keys, leading = _splice_plan(type(frame), tuple(rendered))
    spliced = ",".join(f'"{key}":{rendered[name]}' for name, key in keys)
    rest = frame.model_dump_json(exclude=set(rendered))[1:-1]
    if not rest:
        return f"{{{spliced}}}"
    return f"{{{spliced},{rest}}}" if leading else f"{{{rest},{spliced}}}"


@functools.cache
def _splice_plan(model: type[BaseModel], names: tuple[str, ...]) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The spliced fields' (name, JSON key) pairs in model order, and whether they lead the model."""
    fields = list(model.model_fields)
    unknown = set(names) - set(fields)
    if unknown:
        raise ValueError(f"{model.__name__} has no fields {sorted(unknown)}")
    ordered = [name for name in fields if name in names]
    if fields[: len(ordered)] == ordered:
        leading = True
    elif fields[len(fields) - len(ordered) :] == ordered:
        leading = False
    else:
        raise ValueError(
            f"{model.__name__}: spliced fields {ordered} are neither its first nor its last fields"
        )
    keys = tuple((name, _json_key(model, name)) for name in ordered)
    return keys, leading


def _json_key(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    return field.serialization_alias or field.alias or name
