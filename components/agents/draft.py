"""The Draft tab: an agent's draft as JSON, in the shape of a version's snapshot."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from api.agents import Agent
from components.formatting import ago


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def draft_of(agent: Agent) -> dict[str, Any]:
    """The draft in the same shape as a version's snapshot, so the two compare line by line."""
    return {
        "name": agent.name,
        "provider": agent.provider,
        "providerConfig": agent.provider_config,
        "promptReferences": agent.prompt_references,
    }


def show_draft(agent: Agent) -> None:
    st.code(pretty(draft_of(agent)), language="json")
    st.caption(f"Tags: {', '.join(agent.tags) or 'none'} · updated {ago(agent.updated_at)}")
