"""Fleets: groups of agents and the environments they target; create, edit, delete."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from api import ApiError
from api.agents import Agent
from api.common import MAX_PAGE_SIZE
from api.environments import Environment
from api.fleets import Fleet, FleetDetail
from components import layout
from components.charts import PLOT_CONFIG
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.tables import chosen_row, open_linked, select

TABLE = "fleets_table"
NO_FLEET = "No fleet"

connection = current()
orgdeck = client()


def environment_picker(environments: list[Environment], chosen: list[str], *, key: str) -> list[str]:
    names = {environment.id: environment.name for environment in environments}
    return st.multiselect(
        "Environments",
        list(names),
        default=[env_id for env_id in chosen if env_id in names],
        format_func=names.get,
        help="Where this fleet's agents are meant to run.",
        key=key,
    )


def agents_chart(agents: list[Agent], fleet_names: dict[str, str]) -> None:
    """Agents per fleet, split by provider: how the catalogue is spread at a glance."""
    counts = (
        pd.DataFrame(
            [{"Fleet": fleet_names.get(a.fleet_id or "", NO_FLEET), "Provider": a.provider} for a in agents]
        )
        .value_counts()
        .reset_index(name="Agents")
    )
    figure = px.bar(
        counts,
        x="Agents",
        y="Fleet",
        color="Provider",
        orientation="h",
        height=80 + 40 * counts["Fleet"].nunique(),
    )
    figure.update_layout(margin={"l": 0, "r": 0, "t": 10, "b": 0}, yaxis_title=None, legend_title=None)
    st.plotly_chart(figure, width="stretch", config=PLOT_CONFIG)


def create_form(environments: list[Environment], *, expanded: bool) -> None:
    with st.expander("New fleet", expanded=expanded, icon=":material/add:"), st.form("create_fleet"):
        fields = FormFields("fleet")
        name = fields.text_input("name", key="new_fleet_name")
        description = fields.text_area("description", key="new_fleet_description", height=80)
        environment_ids = environment_picker(environments, [], key="create_fleet_environments")
        fields.slot("environmentIds")
        if st.form_submit_button("Create fleet", type="primary", **control("createFleet")):
            try:
                created = orgdeck.fleets.create(
                    name.strip(), description=description, environment_ids=environment_ids
                )
            except ApiError as error:
                fields.show(error, "create the fleet")
            else:
                fields.clear()
                select(TABLE, created.id)
                notify(f"Created fleet **{plain(created.name)}**. Agents join it from the Agents page.")


def detail(fleet: FleetDetail, environments: list[Environment]) -> None:
    members_col, settings_col = layout.panes("fleet", 2)
    with members_col:
        st.markdown(f"**Agents in {fleet.name}**")
        if fleet.agents:
            st.dataframe(
                pd.DataFrame(
                    [{"Key": a.stable_key, "Name": a.name, "Provider": a.provider} for a in fleet.agents]
                ),
                hide_index=True,
                width="stretch",
            )
        else:
            st.caption("No agents yet: choose this fleet in an agent's edit form on the Agents page.")
        st.markdown("**Environments**")
        st.markdown(" ".join(f"`{e.name}`" for e in fleet.environments) or "None yet.")
    with settings_col, st.form(f"edit_fleet_{fleet.id}"):
        fields = FormFields("fleet")
        name = fields.text_input("name", key=f"edit_fleet_name_{fleet.id}", value=fleet.name)
        description = fields.text_area(
            "description", key=f"edit_fleet_description_{fleet.id}", value=fleet.description, height=80
        )
        environment_ids = environment_picker(
            environments, [e.id for e in fleet.environments], key=f"edit_fleet_environments_{fleet.id}"
        )
        fields.slot("environmentIds")
        if st.form_submit_button("Save fleet", type="primary", **control("updateFleet")):
            try:
                orgdeck.fleets.update(
                    fleet.id, name=name.strip(), description=description, environment_ids=environment_ids
                )
            except ApiError as error:
                fields.show(error, "save the fleet")
            else:
                notify(f"Saved fleet **{plain(name.strip())}**.")
    warning = f"Delete **{fleet.name}**? Its {fleet.agent_count} agent(s) keep existing, outside any fleet."
    if confirmed("Delete fleet", key=f"delete_fleet_{fleet.id}", warning=warning, **control("deleteFleet")):
        try:
            orgdeck.fleets.delete(fleet.id)
        except ApiError as error:
            show_error(error, "delete the fleet")
        else:
            notify(f"Deleted fleet **{plain(fleet.name)}**; its agents are now outside any fleet.")


st.title("Fleets")
st.caption("A fleet groups agents that belong together and names the environments they run in.")
show_notice()

fleets: list[Fleet] = load("list fleets", lambda: orgdeck.fleets.list(limit=MAX_PAGE_SIZE)).items
environments = load("list environments", lambda: orgdeck.environments.list(limit=MAX_PAGE_SIZE)).items
agents = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items

chosen_id = None
if fleets:
    table_col, chart_col = layout.panes("fleets", 2)
    with table_col:
        table = pd.DataFrame(
            [
                {
                    "Name": f.name,
                    "Agents": f.agent_count,
                    "Environments": [e.name for e in f.environments],
                    "Description": f.description,
                    "Updated": ago(f.updated_at),
                }
                for f in fleets
            ]
        )
        open_linked(TABLE)
        chosen_id = chosen_row(
            table,
            [f.id for f in fleets],
            key=TABLE,
            width="stretch",
            column_config={"Environments": st.column_config.ListColumn()},
        )
    with chart_col:
        if agents:
            agents_chart(agents, {f.id: f.name for f in fleets})
else:
    st.info("No fleets yet. Create one below, then add agents to it from the Agents page.")

create_form(environments, expanded=not fleets)

if chosen_id is not None:
    fleet = load("load the fleet", lambda: orgdeck.fleets.get(chosen_id))
    st.subheader(fleet.name, divider="gray")
    detail(fleet, environments)
