"""Answers written as JSON by the database: a page's rows never become records, models and text in
Python, which costs a list several times what its query does."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement, Text, cast, func, literal_column, type_coerce

from service.storage.db import UTCDateTime


def model_json(dialect: str, model: type[BaseModel], values: Mapping[str, Any]) -> ColumnElement[Any]:
    """A JSON object as `model` writes it: `values` (SQL, by field name: one for every field) under
    the fields' wire names in the model's order, timestamps as the wire writes them. A JSON value,
    to nest in another; `json_text` makes it an answer's text."""
    if values.keys() != model.model_fields.keys():
        raise ValueError(f"{model.__name__}: values for {sorted(values)}, fields {list(model.model_fields)}")
    members: list[Any] = []
    for name, field in model.model_fields.items():
        value = values[name]
        if isinstance(getattr(value, "type", None), UTCDateTime):
            value = wire_timestamp(dialect, value)
        members += [literal_column(f"'{field.alias or name}'"), value]
    return (func.json_build_object if dialect == "postgresql" else func.json_object)(*members)


def json_text(dialect: str, value: ColumnElement[Any]) -> ColumnElement[str]:
    """A JSON value as text (PostgreSQL's driver would parse a json value into Python objects)."""
    return cast(value, Text) if dialect == "postgresql" else type_coerce(value, Text)


def model_json_of(dialect: str, model: type[BaseModel], columns: Any, **values: Any) -> ColumnElement[Any]:
    """model_json of the columns named as the model's fields (a table's `.c`, a mapped class), but
    for the fields given by name in `values`."""
    fields = {name: values[name] if name in values else getattr(columns, name) for name in model.model_fields}
    return model_json(dialect, model, fields)


def stored_json(dialect: str, column: ColumnElement[Any]) -> ColumnElement[Any]:
    """A JSON column's value, to nest: SQLite keeps JSON as text, which json() makes a value rather
    than a string (and null stays null)."""
    return column if dialect == "postgresql" else func.json(column)


def wire_timestamp(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[str]:
    """A stored UTC timestamp as api.common.format_timestamp writes it: ISO 8601 to the millisecond,
    cut rather than rounded, with a Z; null stays null."""
    if dialect == "postgresql":
        in_utc = func.timezone(literal_column("'UTC'"), timestamp)
        return func.to_char(in_utc, literal_column("""'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"""), type_=Text)
    # SQLite keeps SQLAlchemy's `YYYY-MM-DD HH:MM:SS.ffffff` (a value another writer left without its
    # fraction gets one).
    text = cast(timestamp, Text)
    day = func.substr(text, literal_column("1"), literal_column("10"), type_=Text)
    clock = func.substr(
        text + literal_column("'.000000'"), literal_column("12"), literal_column("12"), type_=Text
    )
    return day + literal_column("'T'") + clock + literal_column("'Z'")
