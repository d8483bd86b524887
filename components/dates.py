"""The day-range picker the console's date filters share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import streamlit as st


def recent_days(label: str, days: int, *, key: str | None = None) -> tuple[date, date] | None:
    """A picker of UTC days, the last `days` up to today at first: the first and last day picked
    (the same one while a range is being picked), or None when the field is cleared."""
    today = datetime.now(UTC).date()
    picked = st.date_input(
        label,
        value=(today - timedelta(days=days - 1), today),
        max_value=today,
        format="YYYY-MM-DD",
        key=key,
    )
    chosen = picked if isinstance(picked, Sequence) else [picked]
    return (chosen[0], chosen[-1]) if chosen else None
