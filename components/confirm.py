"""A destructive action behind a second click, as the API keys page does it."""

from __future__ import annotations

import streamlit as st


def confirmed(
    action: str, *, key: str, warning: str, disabled: bool = False, help: str | None = None
) -> bool:
    """A button that asks once more before acting; True on the run where the person confirms.

    `key` should name the thing acted on, so that a pending question never carries over to another.
    `disabled` and `help` are the first button's (`**control(operation_id)` of components.permissions).
    """
    pending = f"{key}_pending"
    if not st.session_state.get(pending):
        if st.button(f"{action}…", key=f"{key}_start", disabled=disabled, help=help):
            st.session_state[pending] = True
            st.rerun()
        return False
    st.warning(warning, icon=":material/warning:")
    confirm_col, cancel_col, _ = st.columns([1, 1, 2])
    if confirm_col.button(action, type="primary", key=f"{key}_confirm"):
        st.session_state.pop(pending)
        return True
    if cancel_col.button("Cancel", key=f"{key}_cancel"):
        st.session_state.pop(pending)
        st.rerun()
    return False
