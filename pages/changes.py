"""Changes: change requests waiting for review, with what each would change, to approve or reject
with a comment; and the history of decided ones, with who asked, who reviewed and what it produced.
Each tab's body is a module of components/changes."""

from __future__ import annotations

import streamlit as st

from api.common import MAX_PAGE_SIZE
from components.changes.history import history_tab
from components.changes.review import open_tab
from components.connection import client
from components.feedback import load, show_notice
from components.tables import OPEN_PARAM

HISTORY = "History"
DECIDED = ("applied", "rejected", "conflict", "expired", "cancelled")

orgdeck = client()

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
# A link to a decided request (from what it made, or from Activity) opens the History tab on it.
linked = st.query_params.get(OPEN_PARAM)
open_title = f"Open ({len(waiting.items)})"
decided_linked = any(request.id == linked for request in decided.items)
open_section, history_section = st.tabs(
    [open_title, HISTORY], default=HISTORY if decided_linked else open_title
)
with open_section:
    open_tab(waiting.items)
with history_section:
    history_tab(decided.items)
