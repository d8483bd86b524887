"""The Compare tab: two of an agent's versions, or a version and the draft, side by side."""

from __future__ import annotations

import streamlit as st

from api.agents import Agent, AgentVersion
from components import layout
from components.agents.draft import draft_of, pretty
from components.diff import diff_stats, side_by_side

DRAFT = "Draft"


def compare(agent: Agent, versions: list[AgentVersion]) -> None:
    if not versions:
        st.info("Nothing to compare until the agent has a version.")
        return
    texts = {v.version: pretty(v.snapshot.model_dump(by_alias=True)) for v in versions}
    texts[DRAFT] = pretty(draft_of(agent))
    options: list[int | str] = [DRAFT, *(v.version for v in versions)]
    label = {DRAFT: "Current draft", **{v.version: f"Version {v.version}" for v in versions}}
    older_col, newer_col = layout.fields(f"compare_{agent.stable_key}", 2)
    # Default: what changed in the newest version (or, with one version, what the draft adds).
    older = older_col.selectbox(
        "From", options, index=min(2, len(options) - 1), format_func=label.get, key=f"from_{agent.stable_key}"
    )
    newer = newer_col.selectbox(
        "To",
        options,
        index=1 if len(versions) > 1 else 0,
        format_func=label.get,
        key=f"to_{agent.stable_key}",
    )
    stats = diff_stats(texts[older], texts[newer])
    if stats.identical:
        st.info(f"{label[older]} and {label[newer]} are identical.")
        return
    st.caption(f"{stats.removed} line(s) removed, {stats.added} added.")
    st.html(side_by_side(texts[older], texts[newer], left_title=label[older], right_title=label[newer]))
