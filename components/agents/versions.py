"""The Versions tab: an agent's immutable versions, newest first."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.agents import AgentVersion


def versions_table(versions: list[AgentVersion]) -> None:
    if not versions:
        st.info("No versions yet: **Snapshot version** freezes the draft as version 1.")
        return
    table = pd.DataFrame(
        [
            {
                "Version": v.version,
                "Model": str(v.snapshot.provider_config.get("model", "")),
                "Provider": v.snapshot.provider,
                "Prompts": len(v.snapshot.prompt_references),
                "Content hash": v.content_hash[:12],
                "Created": v.created_at,
            }
            for v in versions
        ]
    )
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={"Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm")},
    )
