"""The day-range picker the console's date filters share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import streamlit as st


def recent_days(
    label: str,
    days: int,
    *,
    key: str | None = None,
    at_most: int | None = None,
    width: int | str = "stretch",
    bind: bool = False,
) -> tuple[date, date] | None:
    """A picker of UTC days, the last `days` up to today at first: the first and last day picked
    (the same one while a range is being picked), or None when the field is cleared. With
    `at_most`, no day further back than that many days can be picked, so that no range is longer
    than what the service accepts. With `bind`, the range is kept in the page's URL under `key`."""
    today = datetime.now(UTC).date()
    picked = st.date_input(
        label,
        value=(today - timedelta(days=days - 1), today),
        min_value=today - timedelta(days=at_most - 1) if at_most else None,
        max_value=today,
        format="YYYY-MM-DD",
        key=key,
        help=f"UTC days; up to {at_most} days back." if at_most else "UTC days.",
        width=width,
        bind="query-params" if bind else None,
    )
    chosen = picked if isinstance(picked, Sequence) else [picked]
    return (chosen[0], chosen[-1]) if chosen else None
