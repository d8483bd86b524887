"""Changes: change requests waiting for review, with what each would change, to approve or reject
with a comment; and the history of decided ones, with who asked, who reviewed and what it produced."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.changes import CHANGE_ROLES, ChangeRequest
from api.common import MAX_PAGE_SIZE
from components.connection import client, current
from components.feedback import load, notify, plain, show_notice
from components.formatting import ago
from components.permissions import control

DECIDED = ("applied", "rejected", "conflict", "expired", "cancelled")
KIND_LABELS = {
    "deployment": "Deployment",
    "label": "Label move",
    "policy": "Policy",
    "environment": "Environment",
}

connection = current()
orgdeck = client()


def requester(request: ChangeRequest) -> str:
    return request.requested_by.email or f"key {request.requested_by.key_name}"


def deployment_preview(preview: dict[str, Any]) -> None:
    rows = []
    for agent in preview["agents"]:
        before = f"v{agent['currentVersion']}" if agent["currentVersion"] else "not deployed"
        base = {"Agent": agent["stableKey"], "Version": f"{before} → v{agent['targetVersion']}"}
        rows += [
            base
            | {
                "Field": c["field"],
                "Change": c["kind"],
                "Before": str(c.get("before")),
                "After": str(c.get("after")),
            }
            for c in agent["changes"]
        ] or [base | {"Field": "", "Change": "unchanged", "Before": "", "After": ""}]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def environment_preview(preview: dict[str, Any]) -> None:
    """An environment change field by field (a secret's or a signing key's value is never in it)."""
    rows = [
        {
            "Field": c["field"],
            "Change": c["kind"],
            "Before": str(c.get("before")),
            "After": str(c.get("after")),
        }
        for c in preview["changes"]
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    if preview.get("carriedBy"):
        st.caption(f"Carried by the protected environments {', '.join(preview['carriedBy'])}.")
    for note in preview.get("notes", []):
        st.caption(note)


def show_preview(request: ChangeRequest) -> None:
    if request.kind == "deployment":
        deployment_preview(request.preview)
    elif request.kind == "environment":
        environment_preview(request.preview)
    elif request.preview.get("diff"):
        st.code(request.preview["diff"], language="diff")
    else:
        st.caption("The content is the same on both sides.")


def review_form(request: ChangeRequest) -> None:
    mine = request.requested_by.key_id == connection.key_id
    with st.form(f"review_{request.id}"):
        comment = st.text_area("Comment", key=f"comment_{request.id}", height=68)
        buttons = st.container(horizontal=True)
        # Reviewing needs the role the change itself needs, and is for another member than the requester.
        needs = CHANGE_ROLES[request.kind]
        approve = buttons.form_submit_button(
            "Approve",
            type="primary",
            icon=":material/check:",
            **control("approveChangeRequest", at_least=needs, disabled=mine),
        )
        reject = buttons.form_submit_button(
            "Reject", icon=":material/close:", **control("rejectChangeRequest", at_least=needs, disabled=mine)
        )
        cancel = (
            buttons.form_submit_button("Cancel request", **control("cancelChangeRequest")) if mine else False
        )
    if mine:
        st.caption("You opened this request: another member reviews it.")
    try:
        if approve:
            done = orgdeck.change_requests.approve(request.id, comment=comment)
            notify(outcome(done))
        elif reject:
            orgdeck.change_requests.reject(request.id, comment=comment)
            notify(f"Rejected the change to **{plain(request.target)}**.")
        elif cancel:
            orgdeck.change_requests.cancel(request.id)
            notify(f"Cancelled the request for **{plain(request.target)}**.")
    except ApiError as error:
        st.error(f"**Could not review it.** {plain(error.message)}", icon=":material/error:")


def outcome(request: ChangeRequest) -> str:
    if request.status == "applied":
        return f"Approved and applied **{plain(request.target)}**: {plain(result_text(request))}."
    if request.status == "conflict":
        return f"Approved, but **{plain(request.target)}** moved meanwhile: {plain(request.conflict or '')}"
    return f"Approved ({len(request.approvals)} of {request.required_approvals})."


def result_text(request: ChangeRequest) -> str:
    result = request.result or {}
    if request.kind == "environment" and result:
        return "deleted" if result.get("deleted") else "applied"
    if "jobId" in result:
        return f"job {result['jobId']}"
    if "label" in result:
        return f"{result['label']} → version {result['version']}"
    if result.get("deleted"):
        return f"policy {result['policyId']} deleted"
    if "policyId" in result:
        return f"policy {result['policyId']} version {result['version']}"
    return request.conflict or ""


def open_tab(requests: list[ChangeRequest]) -> None:
    if not requests:
        st.info("No change waits for review.")
        return
    for request in requests:
        title = f"{KIND_LABELS[request.kind]} · {request.target} · {request.reason}"
        with st.expander(title, expanded=len(requests) == 1):
            st.markdown(
                f"Asked by **{plain(requester(request))}** {ago(request.created_at)} · "
                f"{len(request.approvals)} of {request.required_approvals} approval(s) · "
                f"expires {request.expires_at:%Y-%m-%d %H:%M} UTC"
            )
            for approval in request.approvals:
                st.caption(f"Approved by {plain(approval.email)}: {plain(approval.comment)}")
            show_preview(request)
            review_form(request)


def history_tab(requests: list[ChangeRequest]) -> None:
    if not requests:
        st.info("No change request has been decided yet.")
        return
    rows = [
        {
            "Status": request.status,
            "Kind": KIND_LABELS[request.kind],
            "Target": request.target,
            "Reason": request.reason,
            "Asked by": requester(request),
            "Reviewed by": ", ".join(
                [a.email for a in request.approvals]
                + ([request.rejection.email] if request.rejection else [])
            ),
            "Result": result_text(request),
            "Decided": ago(request.decided_at or request.expires_at),
        }
        for request in requests
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


st.title("Changes")
st.caption(
    "Deployments to protected environments and changes to where they deploy and what they carry, "
    "moves of protected labels and, where required, policy changes wait here for another member's "
    "approval; the last approval applies them as shown."
)
show_notice()
waiting = load(
    "list open change requests", lambda: orgdeck.change_requests.list(status="open", limit=MAX_PAGE_SIZE)
)
decided = load(
    "list decided change requests",
    lambda: orgdeck.change_requests.list(status=",".join(DECIDED), limit=MAX_PAGE_SIZE),
)
open_section, history_section = st.tabs([f"Open ({len(waiting.items)})", "History"])
with open_section:
    open_tab(waiting.items)
with history_section:
    history_tab(decided.items)
