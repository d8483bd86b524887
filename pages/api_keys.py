"""Settings → API keys: list, create (value shown once), revoke (with confirmation)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.tables import chosen_row, open_linked, select

CREATED = "created_api_key"
TABLE = "api_keys_table"

connection = current()
orgdeck = client()

st.title("API keys")
st.caption(
    f"Keys of `{connection.org_slug}`. A key can do everything in this organization: "
    "give each pipeline or integration its own, and revoke it when it is no longer needed."
)
show_notice()

# A newly created key is shown on the run right after creation and then forgotten.
created = st.session_state.pop(CREATED, None)
if created is not None:
    st.success(
        f"Key **{plain(created['name'])}** created. Copy it now (the copy button is at the right of the "
        "box): it will not be shown again.",
        icon=":material/key:",
    )
    st.code(created["key"], language=None)

with st.form("create_api_key"):
    fields = FormFields("apiKey")
    name_col, button_col = st.columns([4, 1], vertical_alignment="bottom")
    name = fields.text_input("name", key="new_api_key_name", where=name_col, label="New key name")
    if button_col.form_submit_button(
        "Create key", type="primary", width="stretch", **control("createApiKey")
    ):
        try:
            issued = orgdeck.api_keys.create(name)
        except ApiError as error:
            fields.show(error, "create the key")
        else:
            fields.clear()
            st.session_state[CREATED] = {"name": issued.name, "key": issued.key}
            select(TABLE, issued.id)
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
open_linked(TABLE)
chosen_id = chosen_row(
    table,
    [key.id for key in keys],
    key=TABLE,
    width="stretch",
    column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
)
chosen = next(key for key in keys if key.id == chosen_id)

st.subheader(f"{chosen.name} ({chosen.prefix}…)")
if chosen.id == connection.key_id:
    st.caption(
        "This is the key the console itself uses, so it is not offered for revocation here: "
        "create another key first, then revoke this one from a console that uses the new one."
    )
    st.stop()
warning = (
    f"Revoke **{plain(chosen.name)}**? Requests using it fail from this moment on. This cannot be undone."
)
# Anyone may revoke their own keys; someone else's, or a service key, needs an admin.
me = connection.caller.member
mine = me is not None and chosen.member is not None and chosen.member.id == me.id
if confirmed(
    "Revoke key",
    key=f"revoke_{chosen.id}",
    warning=warning,
    **control("revokeApiKey", at_least=None if mine else "admin"),
):
    try:
        orgdeck.api_keys.revoke(chosen.id)
    except ApiError as error:
        show_error(error, "revoke the key")
    else:
        notify(f"Revoked **{plain(chosen.name)}**.")
