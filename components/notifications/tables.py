"""What the Deliveries and Delivery log tabs share: a page's size, the filters' `Any`, the colours
of the states, and a table whose picked row opens its delivery's detail."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from components.charts import AMBER, GREEN, RED
from components.notifications.delivery import OPEN_DELIVERY

PAGE_SIZE = 50
ANY = "Any"
STATUS_COLOURS = {"sent": GREEN, "failed": AMBER, "dead": RED}
# A delivery's states: waiting ones in grey, held (its channel is disabled) in blue.
DELIVERY_COLOURS = STATUS_COLOURS | {"pending": "#6b7280", "held": "#2563eb"}


def delivery_table(
    table: pd.DataFrame,
    delivery_ids: list[str],
    *,
    key: str,
    colours: dict[str, str],
    column_config: dict[str, Any],
) -> None:
    """The rows with their Status in colour; picking one opens its delivery (the `delivery_ids` one)."""
    picked = st.dataframe(
        table.style.map(lambda s: f"color: {colours[s]}; font-weight: 600", subset=["Status"]),
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key=key,
        column_config=column_config,
    )
    rows = picked.selection.rows
    open_picked(key, delivery_ids[rows[0]] if rows else None)


def open_picked(key: str, delivery_id: str | None) -> None:
    """Open the delivery of a row just picked in the table `key` (a row left picked does not reopen it)."""
    seen = f"{key}__picked"
    if delivery_id != st.session_state.get(seen):
        st.session_state[seen] = delivery_id
        if delivery_id:
            st.session_state[OPEN_DELIVERY] = delivery_id
            st.rerun()
