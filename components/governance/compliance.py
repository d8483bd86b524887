"""What runs now against every policy, for managers: a heatmap of policy by environment (violations
counted), whose cells open the violating agents with their messages and since when."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from api.governance import Compliance, ComplianceViolation
from components.charts import GREEN, LIGHT, PLOT_CONFIG
from components.connection import client
from components.feedback import attempt, plain
from components.formatting import ago
from components.governance.violations import ENFORCEMENT_COLUMN, enforcement_table

HEATMAP = "compliance_heatmap"
# The cell opened by a click, kept while the page redraws: (policy id, environment name).
OPENED = "compliance_opened"
# From one violation (a light tint, never the compliant green) to many (dark red).
VIOLATION_SCALE = [[0, "#f6c9b8"], [0.4, "#e0674f"], [1, "#8e1b12"]]
ROW_HEIGHT = 44


def compliance_figure(compliance: Compliance) -> go.Figure:
    """Policies down, environments across; a compliant cell is green, a violating one red by count,
    one where none of the policy's agents runs light grey. Each cell's policy id and environment name
    come back as a selected point's `customdata`."""
    policies = list(dict.fromkeys((cell.policy_id, cell.policy_name) for cell in compliance.matrix))
    environments = list(dict.fromkeys(cell.environment_name for cell in compliance.matrix))
    # A cell where no agent of the policy's scope runs has nothing to comply with: None, not 0.
    counts = {
        (cell.policy_id, cell.environment_name): cell.violations if cell.violations + cell.compliant else None
        for cell in compliance.matrix
    }
    grid = [[counts.get((policy_id, env)) for env in environments] for policy_id, _ in policies]
    cells = {
        "x": environments,
        "y": [name for _, name in policies],
        "customdata": [[[policy_id, env] for env in environments] for policy_id, _ in policies],
        "hovertext": [
            [_hover(name, env, count) for env, count in zip(environments, line, strict=True)]
            for (_, name), line in zip(policies, grid, strict=True)
        ],
        "hoverinfo": "text",
        "xgap": 2,
        "ygap": 2,
    }
    figure = go.Figure()
    for colour, shown in ((LIGHT, lambda count: count is None), (GREEN, lambda count: count == 0)):
        flat = [[1 if shown(count) else None for count in line] for line in grid]
        figure.add_trace(go.Heatmap(z=flat, colorscale=[[0, colour], [1, colour]], showscale=False, **cells))
    figure.add_trace(
        go.Heatmap(
            z=[[count or None for count in line] for line in grid],
            colorscale=VIOLATION_SCALE,
            zmin=1,
            text=[[str(count) if count else "" for count in line] for line in grid],
            texttemplate="%{text}",
            colorbar={"title": {"text": "Violations"}, "thickness": 12},
            **cells,
        )
    )
    figure.update_layout(
        height=120 + ROW_HEIGHT * len(policies),
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        yaxis={"autorange": "reversed", "automargin": True},
        xaxis={"side": "top", "automargin": True},
        clickmode="event+select",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure


def _hover(policy: str, environment: str, count: int | None) -> str:
    if count is None:
        return f"{policy} · {environment}: no agent it applies to runs here"
    if count == 0:
        return f"{policy} · {environment}: every agent complies"
    return f"{policy} · {environment}: {count} violation{'s' if count != 1 else ''}; click for the agents"


def open_cell() -> None:
    """The heatmap's callback: a click on a cell opens its violating agents below."""
    points = st.session_state[HEATMAP]["selection"]["points"]
    if points:
        st.session_state[OPENED] = tuple(points[0]["customdata"])


def violation_rows(violations: list[ComplianceViolation]) -> list[dict[str, Any]]:
    return [
        {
            "Agent": violation.agent,
            "Environment": violation.environment_name,
            "Policy": violation.policy_name,
            ENFORCEMENT_COLUMN: violation.enforcement,
            "Message": violation.message,
            "Since": ago(violation.since),
        }
        for violation in violations
    ]


def drill_down(compliance: Compliance) -> None:
    """The violating agents of the cell opened, or of every cell until one is."""
    opened = st.session_state.get(OPENED)
    shown = compliance.violations
    if opened:
        policy_id, environment = opened
        shown = [v for v in shown if v.policy_id == policy_id and v.environment_name == environment]
        names = {cell.policy_id: cell.policy_name for cell in compliance.matrix}
        heading = f"**{plain(names.get(policy_id, policy_id))}** in **{plain(environment)}**"
        with st.container(horizontal=True, vertical_alignment="center"):
            st.markdown(f"Violating agents of {heading}", width="stretch")
            if st.button("Show every violation", key="compliance_all", width="content"):
                st.session_state.pop(OPENED)
                st.rerun()
    elif shown:
        st.markdown("**Every violation** · click a red cell to see only its agents")
    if not shown:
        said = (
            "Every agent there complies with this policy."
            if opened
            else "No violations: everything that runs complies with every policy that applies to it."
        )
        st.success(said, icon=":material/check_circle:")
        return
    st.dataframe(enforcement_table(violation_rows(shown)), hide_index=True, width="stretch")


def compliance_view() -> None:
    st.header("Compliance")
    st.caption(
        "Every policy with a check against what runs now in every environment. Green: every agent "
        "complies; red: agents in violation (darker is more); light grey: none of its agents runs there."
    )
    compliance = attempt("load compliance", client().policies.compliance)
    if compliance is None:
        st.caption("The rest of the page works without it; reload to try again.")
        return
    if not compliance.matrix:
        st.info(
            "No policy with a check yet: give a policy a check in its editor below (or draft one), and "
            "what runs now is checked against it here.",
            icon=":material/rule:",
        )
        return
    st.plotly_chart(
        compliance_figure(compliance),
        width="stretch",
        config=PLOT_CONFIG,
        key=HEATMAP,
        on_select=open_cell,
        selection_mode="points",
    )
    drill_down(compliance)
