"""The Deployments tab: where an agent went, in which version and how it ended, newest first."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.agents import Agent
from components.connection import client
from components.feedback import load


def agent_deployments(agent: Agent) -> None:
    """The agent's newest deployments, and the way to all of them."""
    page = load(
        "load its deployments", lambda: client().deployments.history(agent=agent.stable_key, limit=10)
    )
    if not page.items:
        st.info("Never deployed: preview and deploy it from the **Deploy** tab of the Deployments page.")
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "When": entry.created_at,
                        "Environment": entry.environment_name,
                        "Version": f"v{entry.version}",
                        "Result": entry.status,
                        "Error": entry.error or "",
                    }
                    for entry in page.items
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={"When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
        )
    st.page_link(
        "pages/deployments.py",
        label=f"All {page.total or 0} deployments of {agent.stable_key}",
        icon=":material/history:",
        query_params={"tab": "History", "history_agent": agent.stable_key},
    )
