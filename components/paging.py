"""Where a paged table stands, kept across reruns and sent back to its first page by new filters."""

from __future__ import annotations

from typing import Any

import streamlit as st


def paging_position(key: str, filters: object, first: Any) -> Any:
    """The position kept under `key` (an offset, a page number, a list of cursors), reset to `first`
    whenever `filters` differ from the ones it was reached with."""
    seen = f"{key}__filters"
    if st.session_state.get(seen) != filters:
        st.session_state[seen] = filters
        st.session_state[key] = first
    return st.session_state[key]
