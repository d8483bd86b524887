"""How the Deployments tabs' tables show what they list: a state, result or change tinted by its
colour, a version as `v2`, and any value of a field as text."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from pandas.io.formats.style import Styler

from components.charts import STATUS_COLOURS, tint


def coloured(
    frame: pd.DataFrame, column: str, colours: dict[str, str] = STATUS_COLOURS, *, whole_row: bool = False
) -> Styler:
    """The table with the cells of `column` tinted by their value's colour (whole rows for a diff)."""

    def style(value: object) -> str:
        colour = colours.get(str(value))
        return f"background-color: {tint(colour)}" if colour else ""

    if whole_row:
        return frame.style.apply(lambda row: [style(row[column])] * len(row), axis=1)
    return frame.style.map(style, subset=[column])


def shown(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def version(number: int | None) -> str:
    """`v2`, or nothing: versions are whole numbers, never `2.000000`."""
    return "" if number is None else f"v{number}"
