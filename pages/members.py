"""Settings → Members: who belongs to the organization, with which role and keys; admins add
members, change roles and deactivate (with confirmation). Everyone may read it."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import streamlit as st

from api import ApiError
from api.changes import REQUEST_TTL_MAX_DAYS
from api.members import ROLE_DESCRIPTIONS, ROLES, Member
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.tables import chosen_row, open_linked, select

TABLE = "members_table"
SHOW_INACTIVE = "members_show_inactive"

connection = current()
orgdeck = client()


def add_member_form() -> None:
    allowed = control("createMember")
    with st.expander("Add a member", icon=":material/person_add:"), st.form("add_member"):
        fields = FormFields("member")
        email_col, name_col, role_col = st.columns([3, 3, 2])
        email = fields.text_input("email", key="new_member_email", where=email_col)
        name = fields.text_input("name", key="new_member_name", where=name_col)
        role = role_col.selectbox("Role", ROLES, key="new_member_role", format_func=str.capitalize)
        fields.slot("role", where=role_col)
        if st.form_submit_button("Add member", type="primary", **allowed):
            try:
                added = orgdeck.members.create(email, name, role)
            except ApiError as error:
                fields.show(error, "add the member")
            else:
                fields.clear()
                select(TABLE, added.id)
                notify(f"Added **{plain(added.name)}** as {added.role}.")


def review_settings() -> None:
    """The organization's settings of reviewed changes: whether policies need approval, and how
    long an open change request waits before it expires. Admins change them; everyone sees them."""
    saved = load("read the organization's settings", orgdeck.settings.get)
    approval = "policies need approval" if saved.policy_approval_required else "policies apply directly"
    title = f"Reviewed changes: {approval}, requests expire after {saved.change_request_ttl_days} days"
    with st.expander(title, icon=":material/approval:"), st.form("review_settings"):
        required = st.toggle(
            "New policies and policy changes need another member's approval",
            value=saved.policy_approval_required,
            key="settings_policy_approval",
        )
        days = st.number_input(
            "Days an open change request waits before it expires",
            min_value=1,
            max_value=REQUEST_TTL_MAX_DAYS,
            value=saved.change_request_ttl_days,
            step=1,
            key="settings_request_ttl_days",
        )
        if st.form_submit_button("Save settings", **control("updateSettings")):
            try:
                orgdeck.settings.update(policy_approval_required=required, change_request_ttl_days=int(days))
            except ApiError as error:
                show_error(error, "save the settings")
            else:
                notify("Saved the settings of reviewed changes.")


def member_table(members: list[Member], keys_of: Counter[str]) -> str | None:
    table = pd.DataFrame(
        [
            {
                "Name": m.name,
                "Email": m.email,
                "Role": m.role,
                "Active": m.active,
                "Keys": keys_of[m.id],
                "Added": ago(m.created_at),
                "Id": m.id,
            }
            for m in members
        ]
    )
    open_linked(TABLE)
    return chosen_row(
        table,
        [m.id for m in members],
        key=TABLE,
        width="stretch",
        column_config={"Active": st.column_config.CheckboxColumn(), "Keys": st.column_config.NumberColumn()},
    )


def member_detail(member: Member) -> None:
    st.subheader(f"{member.name} ({member.email})")
    if not member.active:
        st.caption(f"Deactivated {ago(member.deactivated_at)}: their keys no longer work.")
        return
    with st.form(f"change_role_{member.id}"):
        role_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
        role = role_col.selectbox(
            "Role",
            ROLES,
            index=ROLES.index(member.role),
            key=f"role_of_{member.id}",
            format_func=lambda r: f"{r.capitalize()}: {ROLE_DESCRIPTIONS[r]}",
        )
        changed = button_col.form_submit_button("Change role", width="stretch", **control("updateMember"))
        if changed and role != member.role:
            try:
                orgdeck.members.update(member.id, role=role)
            except ApiError as error:
                show_error(error, "change the role")
            else:
                notify(f"**{plain(member.name)}** is now {role}; their keys follow from the next request.")
    warning = (
        f"Deactivate **{plain(member.name)}**? Their keys stop working at once. "
        "The audit trail keeps everything they did."
    )
    if confirmed(
        "Deactivate member", key=f"deactivate_{member.id}", warning=warning, **control("deactivateMember")
    ):
        try:
            orgdeck.members.deactivate(member.id)
        except ApiError as error:
            show_error(error, "deactivate the member")
        else:
            notify(f"Deactivated **{plain(member.name)}**.")


st.title("Members")
st.caption(
    f"The people of `{connection.org_slug}` and what each may do: viewers read everything, authors "
    "also write agents, prompts and policies, operators also run environments and deployments, and "
    "admins also manage members and everyone's keys."
)
show_notice()
review_settings()
add_member_form()
show_inactive = st.toggle("Show deactivated members", key=SHOW_INACTIVE)
members = load("list the members", lambda: orgdeck.members.list(include_inactive=show_inactive)).items
if not members:
    st.info(
        "No members yet: this organization is used through service keys only. Add a member to give "
        "a person a key of their own.",
        icon=":material/group:",
    )
    st.stop()
keys = load("list the keys", orgdeck.api_keys.list).items
keys_of = Counter(key.member.id for key in keys if key.member is not None)
chosen_id = member_table(members, keys_of)
member_detail(next(m for m in members if m.id == chosen_id))
