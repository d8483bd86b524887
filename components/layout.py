"""Layouts that hold from a 1024 px window up: side by side while there is room, stacked when not.

Streamlit's columns keep their share of the width whatever it is, so two panes in a 1024 px window
(a sidebar takes a third) squeeze selects down to two letters. These rows wrap instead: each pane
or field keeps a minimum width and moves below the others when the row has no room for it.
"""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

PANE_MIN_WIDTH = 420
FIELD_MIN_WIDTH = 190
COMPARED_MIN_WIDTH = 300
SIDE_WIDTH = 260
_STYLE = f"""<style>
[class*="st-key-panes_"] > [data-testid="stLayoutWrapper"] {{
  flex: 1 1 {PANE_MIN_WIDTH}px; min-width: min(100%, {PANE_MIN_WIDTH}px);
}}
[class*="st-key-fields_"] > [data-testid="stLayoutWrapper"] {{
  flex: 1 1 {FIELD_MIN_WIDTH}px; min-width: min(100%, {FIELD_MIN_WIDTH}px);
}}
[class*="st-key-compared_"] > [data-testid="stLayoutWrapper"] {{
  flex: 1 1 {COMPARED_MIN_WIDTH}px; min-width: min(100%, {COMPARED_MIN_WIDTH}px);
}}
[class*="st-key-aside_"] > [data-testid="stLayoutWrapper"]:first-child {{
  flex: 0 1 {SIDE_WIDTH}px; min-width: min(100%, {SIDE_WIDTH}px);
}}
[class*="st-key-aside_"] > [data-testid="stLayoutWrapper"]:last-child {{
  flex: 1 1 {PANE_MIN_WIDTH}px; min-width: min(100%, {PANE_MIN_WIDTH}px);
}}
</style>"""


def install() -> None:
    """The rules behind `panes`, `aside` and `fields`, once per run (console.py)."""
    st.html(_STYLE)


def panes(key: str, count: int, *, gap: str = "large") -> list[DeltaGenerator]:
    """`count` panes of equal share, side by side while each can be PANE_MIN_WIDTH px wide."""
    row = st.container(horizontal=True, gap=gap, key=f"panes_{key}")
    return [row.container() for _ in range(count)]


def compared(key: str, count: int) -> list[DeltaGenerator]:
    """`count` versions of one thing side by side while each can be COMPARED_MIN_WIDTH px wide:
    narrower than a pane, so that two still fit beside each other in a pane."""
    row = st.container(horizontal=True, gap="small", key=f"compared_{key}")
    return [row.container() for _ in range(count)]


def aside(key: str) -> tuple[DeltaGenerator, DeltaGenerator]:
    """A narrow pane (a list to choose from) beside a wide one, the wide one below it when narrow."""
    row = st.container(horizontal=True, gap="large", key=f"aside_{key}")
    return row.container(), row.container()


def fields(key: str, count: int) -> list[DeltaGenerator]:
    """A row of `count` form fields, side by side while each can be FIELD_MIN_WIDTH px wide."""
    row = st.container(horizontal=True, gap="small", key=f"fields_{key}", vertical_alignment="bottom")
    return [row.container() for _ in range(count)]
