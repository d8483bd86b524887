"""The fields an agent is configured by, shared by the create and edit forms, and what they parse to."""

from __future__ import annotations

from typing import Any

import streamlit as st

from api.agents import Agent
from api.fleets import Fleet
from components import layout
from components.agents.draft import pretty
from components.forms import FormFields, json_object

NO_FLEET = "No fleet"


def object_field(text: str, field: str) -> dict[str, Any]:
    """One of the forms' JSON-object fields; left empty, an empty object."""
    return json_object(text or "{}", field, example='{"model": "gpt-4o"}')


def parse_tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def fleet_picker(label: str, fleets: list[Fleet], current_id: str | None, *, key: str) -> str | None:
    names = {fleet.id: fleet.name for fleet in fleets}
    options = [None, *names]
    index = options.index(current_id) if current_id in names else 0
    return st.selectbox(
        label, options, index=index, format_func=lambda fid: names.get(fid, NO_FLEET), key=key
    )


def config_fields(fields: FormFields, agent: Agent | None, *, key: str) -> dict[str, Any]:
    """The inputs shared by the create and edit forms; values as typed."""
    provider_col, tags_col = layout.fields(f"{key}_provider_tags", 2)
    provider = fields.text_input(
        "provider", key=f"{key}_provider", where=provider_col, value=agent.provider if agent else ""
    )
    tags = fields.text_input(
        "tags",
        key=f"{key}_tags",
        where=tags_col,
        label="Tags (comma-separated)",
        value=", ".join(agent.tags) if agent else "",
    )
    config_col, references_col = layout.fields(f"{key}_config", 2)
    provider_config = fields.text_area(
        "providerConfig",
        key=f"{key}_config",
        where=config_col,
        label="Provider config (JSON object)",
        value=pretty(agent.provider_config)
        if agent
        else '{\n  "model": "gpt-4o-mini",\n  "temperature": 0.2\n}',
        height=180,
    )
    prompt_references = fields.text_area(
        "promptReferences",
        key=f"{key}_references",
        where=references_col,
        label="Prompt references (JSON object, name → reference)",
        value=pretty(agent.prompt_references) if agent else "{}",
        height=180,
    )
    return {
        "provider": provider.strip(),
        "tags": tags,
        "provider_config": provider_config,
        "prompt_references": prompt_references,
    }


def parsed(typed: dict[str, Any]) -> dict[str, Any]:
    return {
        "provider": typed["provider"],
        "tags": parse_tags(typed["tags"]),
        "provider_config": object_field(typed["provider_config"], "providerConfig"),
        "prompt_references": object_field(typed["prompt_references"], "promptReferences"),
    }
