"""Settings → API keys: list, create (value shown once), revoke (with confirmation)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from components.connection import client, current
from components.feedback import load, show_error
from components.formatting import ago

connection = current()
orgdeck = client()

st.title("API keys")
st.caption(
    f"Keys of `{connection.org_slug}`. A key can do everything in this organization: "
    "give each pipeline or integration its own, and revoke it when it is no longer needed."
)

# A newly created key is shown on the run right after creation and then forgotten.
created = st.session_state.pop("created_api_key", None)
if created is not None:
    st.success(f"Key **{created['name']}** created. Copy it now: it will not be shown again.")
    st.code(created["key"], language=None)

with st.form("create_api_key", clear_on_submit=True):
    name_col, button_col = st.columns([4, 1], vertical_alignment="bottom")
    name = name_col.text_input("New key name", placeholder="e.g. github-actions-deploy", max_chars=200)
    if button_col.form_submit_button("Create key", type="primary", use_container_width=True):
        try:
            issued = orgdeck.api_keys.create(name)
        except ApiError as error:
            show_error(error, "create the key")
        else:
            st.session_state["created_api_key"] = {"name": issued.name, "key": issued.key}
            st.rerun()

keys = load("list API keys", orgdeck.api_keys.list).items
if not keys:
    st.info("This organization has no active keys.")
    st.stop()

table = pd.DataFrame(
    [
        {
            "Name": key.name,
            "Prefix": f"{key.prefix}…",
            "Created": key.created_at,
            "Last used": ago(key.last_used_at),
            "Id": key.id,
        }
        for key in keys
    ]
)
st.dataframe(
    table,
    hide_index=True,
    use_container_width=True,
    column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
)

st.subheader("Revoke a key")
revocable = {f"{key.name} ({key.prefix}…)": key for key in keys if key.id != connection.key_id}
if not revocable:
    st.caption("The only key is the one this console uses; create another before revoking it.")
    st.stop()
choice = st.selectbox("Key", list(revocable), index=None, placeholder="Choose a key to revoke")
if choice and st.button("Revoke…", key="revoke_start"):
    st.session_state["revoke_pending"] = revocable[choice].id
pending = st.session_state.get("revoke_pending")
if pending and choice and revocable[choice].id == pending:
    st.warning(
        f"Revoke **{choice}**? Requests using it fail from this moment on. This cannot be undone.",
        icon=":material/warning:",
    )
    confirm_col, cancel_col, _ = st.columns([1, 1, 4])
    if confirm_col.button("Revoke key", type="primary"):
        st.session_state.pop("revoke_pending")
        try:
            orgdeck.api_keys.revoke(pending)
        except ApiError as error:
            show_error(error, "revoke the key")
        else:
            st.toast(f"Revoked {choice}")
            st.rerun()
    if cancel_col.button("Cancel"):
        st.session_state.pop("revoke_pending")
        st.rerun()
