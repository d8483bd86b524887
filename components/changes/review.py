"""The Open tab: the change requests waiting for review, each with what it would change, to
approve or reject with a comment (or cancel, for the one who asked)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.changes import CHANGE_ROLES, ChangeRequest
from components import layout
from components.changes.waiting import REQUEST_QUERY, opened_by_me
from components.changes.wording import KIND_LABELS, approvals_text, requester, result_text
from components.connection import client, current
from components.feedback import notify, plain
from components.formatting import ago
from components.permissions import control


def shown(value: Any) -> str:
    """A field's value as a reviewer reads it: text as it is, anything else as JSON, unset as such."""
    if value is None:
        return "(not set)"
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def change_row(change: dict[str, Any]) -> dict[str, str]:
    """One field's change as a row of a preview's summary; its values are shown below, per field."""
    return {"Field": change["field"], "Change": change["kind"]}


def field_diffs(changes: list[dict[str, Any]], key: str) -> None:
    """Each field's before and after, side by side while the page is wide, stacked when narrow (a
    reviewer at 1024 px reads both without scrolling sideways)."""
    for number, change in enumerate(changes):
        st.markdown(f"**{plain(change['field'])}** · {change['kind']}")
        before, after = layout.panes(f"{key}_{number}", 2, gap="small")
        for where, side in ((before, "before"), (after, "after")):
            where.caption(side.capitalize())
            where.code(shown(change.get(side)), language=None, wrap_lines=True)


def deployment_preview(preview: dict[str, Any], key: str) -> None:
    rows = []
    for agent in preview["agents"]:
        before = f"v{agent['currentVersion']}" if agent["currentVersion"] else "not deployed"
        base = {"Agent": agent["stableKey"], "Version": f"{before} → v{agent['targetVersion']}"}
        rows += [base | change_row(c) for c in agent["changes"]] or [
            base | {"Field": "", "Change": "unchanged"}
        ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    for agent in preview["agents"]:
        if agent["changes"]:
            with st.expander(f"{agent['stableKey']}: field by field"):
                field_diffs(agent["changes"], f"{key}_{agent['stableKey']}")


def environment_preview(preview: dict[str, Any], key: str) -> None:
    """An environment change field by field (a secret's or a signing key's value is never in it)."""
    rows = [change_row(c) for c in preview["changes"]]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    field_diffs(preview["changes"], key)
    if preview.get("carriedBy"):
        st.caption(f"Carried by the protected environments {', '.join(preview['carriedBy'])}.")
    for note in preview.get("notes", []):
        st.caption(note)


def show_preview(request: ChangeRequest) -> None:
    if request.kind == "deployment":
        deployment_preview(request.preview, request.id)
    elif request.kind == "environment":
        environment_preview(request.preview, request.id)
    elif request.preview.get("diff"):
        st.code(request.preview["diff"], language="diff")
    else:
        st.caption("The content is the same on both sides.")


def review_refusal(request: ChangeRequest) -> str | None:
    """Why the signed-in caller may not review this request, whatever their role; None if they may."""
    caller = current().caller
    if opened_by_me(request):
        return "You opened this request (with any of your keys): another member reviews it."
    if caller.member is None:
        return "A service key belongs to no member and reviews nothing: sign in with your own key."
    if any(review.member_id == caller.member.id for review in request.approvals):
        return "You approved it already: it waits for other members."
    return None


def review_form(request: ChangeRequest) -> None:
    mine = opened_by_me(request)
    with st.form(f"review_{request.id}"):
        comment = st.text_area("Comment", key=f"comment_{request.id}", height=68)
        buttons = st.container(horizontal=True)
        # Reviewing needs the role the change itself needs, and is for another member than the requester.
        needs = CHANGE_ROLES[request.kind]
        why_not = review_refusal(request)
        approve = buttons.form_submit_button(
            "Approve",
            type="primary",
            icon=":material/check:",
            **control("approveChangeRequest", at_least=needs, disabled=bool(why_not), help=why_not),
        )
        reject = buttons.form_submit_button(
            "Reject",
            icon=":material/close:",
            **control("rejectChangeRequest", at_least=needs, disabled=bool(why_not), help=why_not),
        )
        cancel = (
            buttons.form_submit_button("Cancel request", **control("cancelChangeRequest")) if mine else False
        )
    if mine:
        st.caption("You opened this request: another member reviews it.")
    try:
        if approve:
            done = client().change_requests.approve(request.id, comment=comment)
            notify(outcome(done))
        elif reject:
            client().change_requests.reject(request.id, comment=comment)
            notify(f"Rejected the change to **{plain(request.target)}**.")
        elif cancel:
            client().change_requests.cancel(request.id)
            notify(f"Cancelled the request for **{plain(request.target)}**.")
    except ApiError as error:
        st.error(f"**Could not review it.** {plain(error.message)}", icon=":material/error:")


def outcome(request: ChangeRequest) -> str:
    if request.status == "applied":
        return f"Approved and applied **{plain(request.target)}**: {plain(result_text(request))}."
    if request.status == "conflict":
        return f"Approved, but **{plain(request.target)}** moved meanwhile: {plain(request.conflict or '')}"
    return f"Approved ({approvals_text(request)})."


def open_tab(requests: list[ChangeRequest]) -> None:
    if not requests:
        st.info("No change waits for review.")
        return
    linked = st.query_params.get(REQUEST_QUERY)
    for request in requests:
        title = f"{KIND_LABELS[request.kind]} · {request.target} · {request.reason}"
        with st.expander(title, expanded=len(requests) == 1 or request.id == linked):
            st.markdown(
                f"Asked by **{plain(requester(request))}** {ago(request.created_at)} · "
                f"{approvals_text(request)} · "
                f"expires {request.expires_at:%Y-%m-%d %H:%M} UTC"
            )
            for approval in request.approvals:
                uncounted = (
                    "" if approval.counted else f" (not counted: {plain(approval.not_counted_because or '')})"
                )
                st.caption(f"Approved by {plain(approval.email)}: {plain(approval.comment)}{uncounted}")
            show_preview(request)
            review_form(request)
