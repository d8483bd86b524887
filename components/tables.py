"""Tables as the way in: the row selected is the item whose detail the page shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import streamlit as st

if TYPE_CHECKING:  # pandas is the pages' to import, when they draw a table (a third of a second)
    import pandas as pd
    from pandas.io.formats.style import Styler


def select(key: str, item_id: str) -> None:
    """Have the table under `key` select `item_id` the next time it is drawn (a created item)."""
    st.session_state[f"{key}__select"] = item_id


# `?open=<id>`: the item a link elsewhere (the Activity page's rows) asks a page to open.
OPEN_PARAM = "open"


def linked_id() -> str | None:
    """The id the page's `?open=` link names, taken from the URL so that it opens the item once."""
    linked = st.query_params.get(OPEN_PARAM)
    if linked:
        del st.query_params[OPEN_PARAM]
    return linked or None


def open_linked(key: str, translate: Callable[[str], str | None] | None = None) -> None:
    """Have the table under `key` select the item named by the page's `?open=` link, once.

    `translate` turns the linked id into the table's own (an agent's id into its stable key).
    """
    linked = linked_id()
    item_id = translate(linked) if translate and linked else linked
    if item_id is not None:
        select(key, item_id)


def chosen_row(table: pd.DataFrame | Styler, ids: list[str], *, key: str, **kwargs: Any) -> str | None:
    """The table with exactly one row selected, and the id of that row's item (None without rows).

    The choice follows the item, not its position: when a filter or a new item moves rows, the same
    item stays selected while it is listed. `select` asks for another one.
    """
    if not ids:
        st.dataframe(table, hide_index=True, **kwargs)
        return None
    memory_key = f"{key}__memory"
    remembered: dict[str, Any] = st.session_state.get(memory_key, {})
    wanted = st.session_state.pop(f"{key}__select", None)
    shown = _selected_row(st.session_state.get(key))
    clicked = shown is not None and shown != remembered.get("row")
    if wanted is None and not clicked:
        wanted = remembered.get("id")
    if wanted in ids and (shown is None or shown >= len(ids) or ids[shown] != wanted):
        # Set before the table is drawn, the selection reaches the browser with it.
        st.session_state[key] = {"selection": {"rows": [ids.index(wanted)], "columns": []}}
    event = st.dataframe(
        table,
        key=key,
        on_select="rerun",
        selection_mode="single-row-required",
        hide_index=True,
        **kwargs,
    )
    row = _selected_row(event)
    index = row if row is not None and row < len(ids) else 0
    st.session_state[memory_key] = {"row": index, "id": ids[index]}
    return ids[index]


def _selected_row(state: Any) -> int | None:
    if not state:
        return None
    rows = state["selection"]["rows"]
    return rows[0] if rows else None
