"""The History tab: the decided change requests, with who asked, who reviewed and what it produced;
a request a link names (`?open=chg_…`, from a job, a label, a policy or Activity) is the one shown."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.changes import ChangeRequest
from components.changes.wording import KIND_LABELS, requester, result_text
from components.feedback import plain
from components.formatting import ago
from components.tables import chosen_row, open_linked

TABLE = "changes_history_table"


def reviewers(request: ChangeRequest) -> str:
    return ", ".join(
        [a.email for a in request.approvals] + ([request.rejection.email] if request.rejection else [])
    )


def request_detail(request: ChangeRequest) -> None:
    st.markdown(
        f"**{KIND_LABELS[request.kind]} · {plain(request.target)}**, {request.status}: {plain(request.reason)}"
    )
    st.caption(
        f"`{request.id}` · asked by {plain(requester(request))} on {request.created_at:%Y-%m-%d %H:%M} UTC"
        + (f" · decided {request.decided_at:%Y-%m-%d %H:%M} UTC" if request.decided_at else "")
    )
    for review in [*request.approvals, *([request.rejection] if request.rejection else [])]:
        verdict = "Approved" if review.verdict == "approve" else "Rejected"
        comment = f": {plain(review.comment)}" if review.comment else ""
        st.caption(f"{verdict} by {plain(review.email)}{comment}")
    produced = result_text(request)
    if produced:
        st.caption(f"Result: {plain(produced)}")


def history_tab(requests: list[ChangeRequest]) -> None:
    if not requests:
        st.info("No change request has been decided yet.")
        return
    rows = [
        {
            "Status": request.status,
            "Kind": KIND_LABELS[request.kind],
            "Target": request.target,
            "Asked by": requester(request),
            "Reviewed by": reviewers(request),
            "Decided": ago(request.decided_at or request.expires_at),
        }
        for request in requests
    ]
    open_linked(TABLE)
    chosen_id = chosen_row(pd.DataFrame(rows), [r.id for r in requests], key=TABLE, width="stretch")
    request_detail(next(r for r in requests if r.id == chosen_id))
