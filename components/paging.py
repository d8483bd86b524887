"""The one pager of the console's paged tables: offsets or cursors, newest first or in order."""

from __future__ import annotations

from typing import Any

import streamlit as st


class Pager:
    """Where a paged table stands: the starts of the pages walked through (offsets or cursors).

    They are kept under `key` in plain session state, not in a widget's: Streamlit drops a widget's
    state when its page is left, so a position kept there is gone on the way back. A change of
    `filters` sends the table back to its first page.
    """

    def __init__(self, key: str, filters: object) -> None:
        self.key = key
        seen = f"{key}__filters"
        if st.session_state.get(seen) != filters or key not in st.session_state:
            st.session_state[seen] = filters
            st.session_state[key] = []

    @property
    def start(self) -> Any:
        """Where the page shown starts (what the previous page said comes next); None on the first."""
        starts = st.session_state[self.key]
        return starts[-1] if starts else None

    @property
    def number(self) -> int:
        """The page shown, counted from 1."""
        return len(st.session_state[self.key]) + 1

    @property
    def offset(self) -> int:
        return self.start or 0

    def controls(
        self, next_start: Any, caption: str, *, labels: tuple[str, str] = ("Newer", "Older")
    ) -> None:
        """Back and forward buttons, and what the page holds; forward is off when `next_start` is None."""
        back, forward = labels
        row = st.container(horizontal=True, vertical_alignment="center")
        row.button(
            back,
            icon=":material/chevron_left:",
            on_click=self._back,
            disabled=not st.session_state[self.key],
            help=None if st.session_state[self.key] else "This is the first page.",
            key=f"{self.key}_back",
        )
        row.button(
            forward,
            icon=":material/chevron_right:",
            on_click=self._forward,
            args=(next_start,),
            disabled=next_start is None,
            help="This is the last page." if next_start is None else None,
            key=f"{self.key}_forward",
        )
        row.caption(caption)

    def _back(self) -> None:
        st.session_state[self.key] = st.session_state[self.key][:-1]

    def _forward(self, start: Any) -> None:
        st.session_state[self.key] = [*st.session_state[self.key], start]


def offset_caption(offset: int, shown: int, total: int, noun: str) -> str:
    """`51 to 100 of 1,234 attempts`."""
    return f"{offset + 1:,} to {offset + shown:,} of {total:,} {noun}"


def next_offset(offset: int, shown: int, total: int) -> int | None:
    return offset + shown if offset + shown < total else None
