"""The Overview's status: every agent's state in every environment, what needs attention (drift
shown field by field, never fixed silently), and the number of days after which a pair is stale."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.deployments import AGENT_STATES, DEFAULT_STATUS_PAGE_SIZE, AgentStatus, FieldChange, StatusMatrix
from components.charts import PLOT_CONFIG, STATE_COLOURS, STATE_LABELS, status_matrix_figure
from components.connection import client
from components.deployments.tables import coloured, shown, version
from components.deployments.tabs import BOUND
from components.feedback import attempt, load, notify, show_error
from components.formatting import ago
from components.paging import Pager, next_offset, offset_caption
from components.permissions import control

STATES = "state"


def changes_frame(rows: list[tuple[str, FieldChange]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "Agent": stable_key,
                "Field": change.field,
                "Change": change.kind,
                "Before": shown(change.before),
                "After": shown(change.after),
            }
            for stable_key, change in rows
        ]
    )


def waiting(item: AgentStatus) -> str:
    """What newer than the running config has waited: `version 2 → 3`, `promptPins.system 1.2.0 → 1.3.0`."""
    return ", ".join(f"{change.field} {change.before} → {change.after}" for change in item.newer)


def status_pane() -> None:
    """The matrix, filtered to agents with pairs in the states picked, a page of agents at a time."""
    states = st.pills(
        "Only agents with pairs that are",
        AGENT_STATES,
        selection_mode="multi",
        format_func=STATE_LABELS.get,
        key=STATES,
        bind=BOUND,
    )
    pager = Pager("matrix_pager", tuple(states))
    matrix = attempt(
        "load the status matrix",
        lambda: client().deployments.status(
            state=states or None, limit=DEFAULT_STATUS_PAGE_SIZE, offset=pager.offset
        ),
    )
    if matrix is not None:
        status_section(matrix, pager)


def status_section(matrix: StatusMatrix, pager: Pager) -> None:
    counts = " · ".join(f"{STATE_LABELS[state]} **{matrix.counts.get(state, 0)}**" for state in AGENT_STATES)
    st.markdown(f"**Agents by environment** &nbsp; {counts}")
    if not matrix.items:
        st.info("No agents to show yet: create and snapshot agents on the Agents page.")
        return
    st.plotly_chart(status_matrix_figure(matrix), width="stretch", config=PLOT_CONFIG)
    if matrix.total_agents > matrix.limit:
        shown_agents = len({item.stable_key for item in matrix.items})
        pager.controls(
            next_offset(matrix.offset, shown_agents, matrix.total_agents),
            offset_caption(matrix.offset, shown_agents, matrix.total_agents, "agents"),
            labels=("Previous", "Next"),
        )
    attention = [item for item in matrix.items if item.state in ("drifted", "stale", "error")]
    if attention:
        needs_attention(attention, {environment.id: environment.name for environment in matrix.environments})


def needs_attention(attention: list[AgentStatus], names: dict[str, str]) -> None:
    """The pairs drifted, stale or failed, each with why, and the drift of one of them field by field."""
    with st.expander(f"What needs attention ({len(attention)})", icon=":material/troubleshoot:"):
        frame = pd.DataFrame(
            [
                {
                    "Agent": item.stable_key,
                    "Environment": names.get(item.environment_id, item.environment_id),
                    "State": item.state,
                    "Running": version(item.deployed_version),
                    "Newest": version(item.latest_version),
                    "Since": ago(item.since, never=""),
                    "Why": item.error or ", ".join(change.field for change in item.drift) or waiting(item),
                }
                for item in attention
            ]
        )
        st.dataframe(coloured(frame, "State", STATE_COLOURS), hide_index=True, width="stretch")
        drifted = [item for item in attention if item.drift]
        if drifted:
            labels = {f"{i.stable_key} in {names.get(i.environment_id, '?')}": i for i in drifted}
            chosen = labels[st.selectbox("Drift of", list(labels), key="drift_choice")]
            drift = changes_frame([(chosen.stable_key, change) for change in chosen.drift])
            st.dataframe(coloured(drift, "Change", whole_row=True), hide_index=True, width="stretch")
            st.caption("Drift is flagged, never fixed silently: redeploy from the Deploy tab to resolve it.")


def stale_setting() -> None:
    settings = load("read the deployment settings", client().deployments.settings)
    with st.popover(f"Stale after {settings.stale_after_days} days", icon=":material/schedule:"):
        days = st.number_input(
            "Days a newer version may wait undeployed",
            min_value=1,
            max_value=365,
            value=settings.stale_after_days,
            key="stale_after_days",
        )
        if st.button("Save", key="save_stale_after", **control("updateDeploymentSettings")):
            try:
                client().deployments.update_settings(stale_after_days=int(days))
            except ApiError as error:
                show_error(error, "save the stale threshold")
            else:
                notify(f"Pairs are now stale after **{int(days)}** days.")
