"""Agents: the catalogue (filter, create), and per agent its draft, edits, versions and their diff.
Each of an agent's tabs is a module of components/agents."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from api import ApiError
from api.agents import Agent
from api.common import MAX_PAGE_SIZE
from api.fleets import Fleet
from components import layout
from components.agents.compare import compare
from components.agents.config import NO_FLEET, config_fields, fleet_picker, parsed
from components.agents.deployments import agent_deployments
from components.agents.draft import show_draft
from components.agents.edit import edit_agent
from components.agents.versions import versions_table
from components.connection import client
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields, InvalidField
from components.permissions import control
from components.tables import chosen_row, open_linked, select

TABLE = "agents_table"
BOUND = "query-params"

orgdeck = client()


def version_state(agent: Agent) -> str:
    if agent.latest_version is None:
        return "never snapshotted"
    suffix = " + unversioned changes" if agent.has_unversioned_changes else ""
    return f"v{agent.latest_version}{suffix}"


def create_form(fleets: list[Fleet], *, expanded: bool) -> None:
    with st.expander("New agent", expanded=expanded, icon=":material/add:"), st.form("create_agent"):
        fields = FormFields("agent")
        key_col, name_col = layout.fields("create_agent_names", 2)
        stable_key = fields.text_input("stableKey", key="create_stable_key", where=key_col)
        name = fields.text_input(
            "name", key="create_name", where=name_col, placeholder="Defaults to the stable key"
        )
        typed = config_fields(fields, None, key="create")
        fleet_id = fleet_picker("Fleet", fleets, None, key="create_fleet")
        fields.slot("fleetId")
        if st.form_submit_button("Create agent", type="primary", **control("createAgent")):
            try:
                created = orgdeck.agents.create(
                    stable_key.strip(), name=name.strip() or None, fleet_id=fleet_id, **parsed(typed)
                )
            except (InvalidField, ApiError) as error:
                fields.show(error, "create the agent")
            else:
                fields.clear()
                select(TABLE, created.stable_key)
                notify(f"Created agent **{plain(created.stable_key)}**. Snapshot it to make version 1.")


def snapshot(agent: Agent, where: DeltaGenerator) -> None:
    """Freeze the draft as the next version: a button beside the agent's name, off while nothing changed."""
    if where.button(
        "Snapshot version",
        type="primary",
        width="content",
        key="snapshot",
        **control(
            "createAgentVersion",
            disabled=not agent.has_unversioned_changes,
            help="Freeze the current draft as the next immutable version."
            if agent.has_unversioned_changes
            else "The draft equals the newest version: nothing to snapshot.",
        ),
    ):
        try:
            version = orgdeck.agents.snapshot(agent.stable_key)
        except ApiError as error:
            show_error(error, "snapshot the agent")
        else:
            notify(
                f"Snapshotted **{plain(agent.stable_key)}** as version {version.version}. Deploy it from "
                "the **Deploy** tab of the Deployments page."
            )


def detail(agent: Agent, fleets: list[Fleet]) -> None:
    fleet_names = {fleet.id: fleet.name for fleet in fleets}
    st.subheader(agent.name, anchor=False)
    head = st.container(horizontal=True, vertical_alignment="center")
    head.markdown(
        f"`{agent.stable_key}` · {plain(agent.provider)} · "
        f"{plain(fleet_names.get(agent.fleet_id or '', NO_FLEET))} · **{version_state(agent)}**"
        + (f" · tags {plain(', '.join(agent.tags))}" if agent.tags else "")
        + f" · updated {ago(agent.updated_at)}",
        width="stretch",
    )
    snapshot(agent, head)
    versions = load(
        "list versions", lambda: orgdeck.agents.versions(agent.stable_key, limit=MAX_PAGE_SIZE)
    ).items
    draft_tab, edit_tab, versions_tab, diff_tab, deployments_tab = st.tabs(
        ["Draft", "Edit", f"Versions ({len(versions)})", "Compare", "Deployments"]
    )
    with draft_tab:
        show_draft(agent)
    with edit_tab:
        edit_agent(agent, fleets)
    with versions_tab:
        versions_table(versions)
    with diff_tab:
        compare(agent, versions)
    with deployments_tab:
        agent_deployments(agent)


st.title("Agents")
st.caption(
    "Each agent has a draft you can edit freely and immutable versions, snapshots of the draft "
    "numbered 1, 2, 3…, that deployments run."
)
show_notice()

fleets = load("list fleets", lambda: orgdeck.fleets.list(limit=MAX_PAGE_SIZE)).items
everything = load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
fleet_names = {fleet.id: fleet.name for fleet in fleets}

search_col, tags_col, provider_col, fleet_col = layout.fields("agent_filters", 4)
search = search_col.text_input(
    "Search", placeholder="Key or name", key="agent_search", bind=BOUND, max_chars=200
)
tags = tags_col.multiselect(
    "Tags (all must match)", sorted({t for a in everything for t in a.tags}), key="agent_tags", bind=BOUND
)
provider = provider_col.selectbox(
    "Provider",
    sorted({a.provider for a in everything}),
    index=None,
    placeholder="Any",
    key="agent_provider",
    bind=BOUND,
)
fleet = fleet_col.selectbox(
    "Fleet",
    list(fleet_names),
    index=None,
    format_func=fleet_names.get,
    placeholder="Any",
    key="agent_fleet",
    bind=BOUND,
)
filtered = any([search.strip(), tags, provider, fleet])
agents = (
    load(
        "filter agents",
        lambda: orgdeck.agents.list(
            search=search.strip() or None,
            tags=tags or None,
            provider=provider,
            fleet_id=fleet,
            limit=MAX_PAGE_SIZE,
        ),
    ).items
    if filtered
    else everything
)

chosen = None
if agents:
    st.caption(
        (f"{len(agents)} of {len(everything)} agents" if filtered else f"{len(agents)} agents")
        + ". Select one to see its draft, versions and history."
    )
    table = pd.DataFrame(
        [
            {
                "Key": a.stable_key,
                "Name": a.name,
                "Model": str(a.provider_config.get("model", "")),
                "Fleet": fleet_names.get(a.fleet_id or "", ""),
                "Version": f"v{a.latest_version}" if a.latest_version else "",
                "Unversioned edits": a.has_unversioned_changes,
            }
            for a in agents
        ]
    )
    open_linked(TABLE, lambda agent_id: next((a.stable_key for a in agents if a.id == agent_id), None))
    chosen = chosen_row(
        table,
        [a.stable_key for a in agents],
        key=TABLE,
        width="stretch",
        column_config={
            "Version": st.column_config.TextColumn(help="The newest version; empty: never snapshotted"),
            "Unversioned edits": st.column_config.CheckboxColumn(
                help="The draft has changes that no version holds yet"
            ),
        },
    )
elif filtered:
    st.info("No agent matches these filters.")
else:
    st.info("No agents yet. Create the first one below: a stable key and a provider are enough.")

create_form(fleets, expanded=not everything)

if chosen is not None:
    detail(next(a for a in agents if a.stable_key == chosen), fleets)
