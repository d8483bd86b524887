"""What an approved change request made (a job, a label's version, a policy version, an audit
event) says about it: who asked, who approved, and the way to the request itself."""

from __future__ import annotations

import streamlit as st

from api.approvals import ChangeRequestRef
from components.feedback import plain
from components.tables import OPEN_PARAM

CHANGES_PAGE = "pages/changes.py"


def asked_and_approved(ref: ChangeRequestRef) -> str:
    """`asked by ana@example.com, approved by bo@example.com`."""
    asked = ref.requested_by.email or f"key {ref.requested_by.key_name}"
    approvers = ", ".join(approver.email for approver in ref.approved_by) or "nobody"
    return f"asked by {asked}, approved by {approvers}"


def made_by_request(ref: ChangeRequestRef) -> None:
    """A line naming the request's people, and a link that opens the request on the Changes page."""
    with st.container(horizontal=True, vertical_alignment="center"):
        st.caption(
            f":material/approval: Applied by change request `{ref.id}`: {plain(asked_and_approved(ref))}",
            width="stretch",
        )
        st.page_link(
            CHANGES_PAGE, label="Open the request", query_params={OPEN_PARAM: ref.id}, width="content"
        )
