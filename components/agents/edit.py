"""The Edit tab: the draft's form, and archiving the agent."""

from __future__ import annotations

import streamlit as st

from api import ApiError
from api.agents import Agent
from api.fleets import Fleet
from components.agents.config import config_fields, fleet_picker, parsed
from components.confirm import confirmed
from components.connection import client
from components.feedback import notify, plain, show_error
from components.forms import FormFields, InvalidField
from components.permissions import control


def edit_agent(agent: Agent, fleets: list[Fleet]) -> None:
    """The draft's form, and below it the way out: archiving."""
    edit_form(agent, fleets)
    archive(agent)


def edit_form(agent: Agent, fleets: list[Fleet]) -> None:
    with st.form(f"edit_agent_{agent.stable_key}"):
        fields = FormFields("agent")
        name = fields.text_input("name", key=f"edit_{agent.stable_key}_name", value=agent.name)
        typed = config_fields(fields, agent, key=f"edit_{agent.stable_key}")
        fleet_id = fleet_picker("Fleet", fleets, agent.fleet_id, key=f"edit_{agent.stable_key}_fleet")
        fields.slot("fleetId")
        if st.form_submit_button("Save draft", type="primary", **control("updateAgent")):
            try:
                client().agents.update(
                    agent.stable_key,
                    name=name.strip(),
                    fleet_id=fleet_id,
                    leave_fleet=fleet_id is None and agent.fleet_id is not None,
                    **parsed(typed),
                )
            except (InvalidField, ApiError) as error:
                fields.show(error, "save the draft")
            else:
                notify(f"Saved the draft of **{plain(agent.stable_key)}**. Snapshot it to freeze a version.")


def archive(agent: Agent) -> None:
    warning = (
        f"Archive **{agent.stable_key}**? It and its versions disappear from every list; "
        "its key stays taken. This cannot be undone from the console."
    )
    if confirmed(
        "Archive agent", key=f"archive_{agent.stable_key}", warning=warning, **control("archiveAgent")
    ):
        try:
            client().agents.archive(agent.stable_key)
        except ApiError as error:
            show_error(error, "archive the agent")
        else:
            notify(f"Archived **{plain(agent.stable_key)}**.")
