"""The History tab: the decided change requests, with who asked, who reviewed and what it produced."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.changes import ChangeRequest
from components.changes.wording import KIND_LABELS, requester, result_text
from components.formatting import ago


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
