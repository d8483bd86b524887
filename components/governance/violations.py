"""How a policy violation is shown wherever one appears: tinted by its enforcement (deny red, warn
amber, audit grey), and a deployment refused by a deny policy said in words."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

from api import ApiError
from api.governance import Violation
from components.charts import AMBER, GREY, RED
from components.deployments.tables import coloured
from components.feedback import plain

POLICY_VIOLATION = "policy_violation"
ENFORCEMENT_COLOURS = {"deny": RED, "warn": AMBER, "audit": GREY}
ENFORCEMENT_LABELS = {
    "deny": "deny (refuses the deployment)",
    "warn": "warn (goes ahead, shown and recorded)",
    "audit": "audit (recorded only)",
}
ENFORCEMENT_COLUMN = "Enforcement"


def enforcement_table(rows: list[dict[str, object]]) -> Styler:
    """Rows of violations, each tinted by the colour of its `Enforcement`."""
    return coloured(pd.DataFrame(rows), ENFORCEMENT_COLUMN, ENFORCEMENT_COLOURS, whole_row=True)


def is_refusal(error: ApiError) -> bool:
    return error.code == POLICY_VIOLATION


def show_refusal(error: ApiError, action: str) -> None:
    """A 403 policy_violation in words: each policy, agent and what is wrong, as the service said."""
    reasons = "\n".join(f"- {plain(detail.message)}" for detail in error.details)
    st.error(
        f"**Could not {action}: a deny policy refuses it.** {plain(error.message)}\n\n{reasons}\n\n"
        "Change the agent to comply, or ask an operator for an exception on the Policies page.",
        icon=":material/block:",
    )


def agent_violations(violations: list[Violation]) -> bool:
    """The violations a deployment would meet, per agent and policy; True when a deny one applies
    (one that a live exception lets through does not)."""
    if not violations:
        return False
    rows = [
        {
            "Agent": violation.agent,
            "Policy": violation.policy_name,
            ENFORCEMENT_COLUMN: violation.enforcement,
            "Message": violation.message
            + (" (could not be evaluated)" if violation.outcome == "error" else ""),
            "Exception": violation.exception_id or "",
        }
        for violation in violations
    ]
    denied = [v for v in violations if v.enforcement == "deny" and not v.exception_id]
    st.markdown(f"**Policy violations** · {len(violations)} ({len(denied)} refusing the deployment)")
    st.dataframe(enforcement_table(rows), hide_index=True, width="stretch")
    if denied:
        st.error(
            "A deny policy refuses this deployment: change the agents to comply, or ask an operator for "
            "an exception on the Policies page.",
            icon=":material/block:",
        )
        st.page_link("pages/governance.py", label="Policies: exceptions", icon=":material/policy:")
    return bool(denied)
