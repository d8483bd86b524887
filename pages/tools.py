"""Tools: the catalogue agents can call, and which version of each runs in which environment."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from api import ApiError
from api.common import MAX_PAGE_SIZE
from api.tools import EMPTY_INPUT_SCHEMA, Tool, ToolDeployment
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, show_error
from components.formatting import ago

NOTICE = "tools_notice"
ALL = "All"
SCHEMA_TEMPLATE = json.dumps(
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}, indent=2
)

connection = current()
orgdeck = client()


def notify(message: str) -> None:
    st.session_state[NOTICE] = message
    st.rerun()


def parse_schema(text: str) -> dict[str, Any] | None:
    """The schema typed in, or None after saying why it is not JSON (the service checks the rest)."""
    try:
        schema = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        st.error(
            f"The input schema is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})."
        )
        return None
    return schema


def arguments(tool: Tool) -> str:
    """`query*, limit`: the argument names, required ones starred."""
    required = set(tool.input_schema.get("required", []))
    names = tool.input_schema.get("properties", {})
    return ", ".join(f"{name}*" if name in required else name for name in names)


def edit_panel(tool: Tool) -> None:
    with st.form(f"edit_tool_{tool.id}"):
        name = st.text_input("Name", value=tool.name, max_chars=200)
        description = st.text_area("Description", value=tool.description, max_chars=2000)
        schema_text = st.text_area(
            "Input schema (JSON)", value=json.dumps(tool.input_schema, indent=2), height=220
        )
        if st.form_submit_button("Save changes", type="primary"):
            schema = parse_schema(schema_text)
            if schema is not None:
                try:
                    orgdeck.tools.update(tool.id, name=name, description=description, input_schema=schema)
                except ApiError as error:
                    show_error(error, "save the tool")
                else:
                    notify(f"Saved **{name}**.")
    warning = f"Delete **{tool.name}** (`{tool.tool_key}`)? Records of its deployments stay."
    if confirmed("Delete tool", key=f"delete_tool_{tool.id}", warning=warning):
        try:
            orgdeck.tools.delete(tool.id)
        except ApiError as error:
            show_error(error, "delete the tool")
        else:
            notify(f"Deleted tool **{tool.name}**.")


def version_order(version: str) -> tuple[tuple[int, int | str], ...]:
    """`1.10.0` after `1.9.2`: digit runs compare as numbers, anything else as text."""
    parts = re.findall(r"\d+|[^\d.]+", version)
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in parts)


def version_matrix(records: list[ToolDeployment]) -> go.Figure:
    """Tools by environments, each cell the running version: green where it is the tool's highest."""
    tools = sorted({r.tool_key for r in records})
    environments = sorted({r.environment for r in records})
    newest: dict[str, str] = {}
    for record in sorted(records, key=lambda r: version_order(r.version)):
        newest[record.tool_key] = record.version
    cells = {(r.tool_key, r.environment): r for r in records}
    current_flags = [
        [None if (t, e) not in cells else float(cells[t, e].version == newest[t]) for e in environments]
        for t in tools
    ]
    labels = [[cells[t, e].version if (t, e) in cells else "" for e in environments] for t in tools]
    figure = go.Figure(
        go.Heatmap(
            z=current_flags,
            x=environments,
            y=tools,
            text=labels,
            texttemplate="%{text}",
            colorscale=[[0, "#f4b860"], [1, "#6cc08b"]],
            zmin=0,
            zmax=1,
            showscale=False,
            xgap=3,
            ygap=3,
            hovertemplate="%{y} in %{x}: %{text}<extra></extra>",
        )
    )
    figure.update_layout(
        height=80 + 44 * len(tools),
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        yaxis={"autorange": "reversed"},
    )
    return figure


st.title("Tools")
st.caption(
    "The tools agents can call, each with the JSON Schema of its input, and the record of which version "
    "of each is deployed in which environment."
)
notice = st.session_state.pop(NOTICE, None)
if notice:
    st.success(notice, icon=":material/check_circle:")

tools = load("list tools", lambda: orgdeck.tools.list(limit=MAX_PAGE_SIZE)).items
every_record = load("list tool deployments", lambda: orgdeck.tool_deployments.list(limit=MAX_PAGE_SIZE)).items

tools_col, records_col, environments_col = st.columns(3)
tools_col.metric("Tools", len(tools))
records_col.metric("Deployment records", len(every_record))
environments_col.metric("Environments with tools", len({r.environment for r in every_record}))

if tools:
    catalogue = pd.DataFrame(
        [
            {
                "Name": t.name,
                "Key": t.tool_key,
                "Arguments (* required)": arguments(t),
                "Updated": ago(t.updated_at),
                "Description": t.description,
            }
            for t in tools
        ]
    )
    st.dataframe(catalogue, hide_index=True, width="stretch")
else:
    st.info("No tools yet. Register the first one below with the JSON Schema of its input.")

with (
    st.expander("Register a tool", expanded=not tools, icon=":material/add:"),
    st.form("create_tool", clear_on_submit=True),
):
    name_col, key_col = st.columns(2)
    name = name_col.text_input("Name", placeholder="e.g. Search Zendesk tickets", max_chars=200)
    tool_key = key_col.text_input(
        "Tool key",
        placeholder="e.g. zendesk.search_tickets",
        help="Unique and permanent: a-z, 0-9, . _ -",
    )
    description = st.text_input("Description", max_chars=2000)
    schema_text = st.text_area("Input schema (JSON)", value=SCHEMA_TEMPLATE, height=180)
    if st.form_submit_button("Register tool", type="primary"):
        schema = parse_schema(schema_text) if schema_text.strip() else dict(EMPTY_INPUT_SCHEMA)
        if schema is not None:
            try:
                created = orgdeck.tools.create(
                    name, tool_key.strip(), description=description, input_schema=schema
                )
            except ApiError as error:
                show_error(error, "register the tool")
            else:
                notify(f"Registered **{created.name}** (`{created.tool_key}`).")

if tools:
    with st.expander("Edit or delete a tool", icon=":material/edit:"):
        by_label = {f"{t.name} ({t.tool_key})": t for t in tools}
        choice = st.selectbox("Tool", list(by_label), key="tool_choice")
        edit_panel(by_label[choice])

st.subheader("Deployments")
if not every_record:
    st.info("No tool deployment records yet. Pipelines report them with POST /agents/tool-deployments.")
    st.stop()

tool_filter_col, environment_filter_col = st.columns(2)
tool_name = tool_filter_col.selectbox("Tool", [ALL, *sorted({r.tool_name for r in every_record})])
environment = environment_filter_col.selectbox(
    "Environment", [ALL, *sorted({r.environment for r in every_record})]
)
records = load(
    "list tool deployments",
    lambda: orgdeck.tool_deployments.list(
        tool_name=None if tool_name == ALL else tool_name,
        environment=None if environment == ALL else environment,
        limit=MAX_PAGE_SIZE,
    ),
).items
if not records:
    st.info("No deployment matches these filters.")
    st.stop()

st.plotly_chart(version_matrix(records), width="stretch", config={"displayModeBar": False})
st.caption(
    "Green: the highest version of the tool deployed anywhere. Amber: an environment running an older one."
)
deployments = pd.DataFrame(
    [
        {
            "Tool": r.tool_name,
            "Key": r.tool_key,
            "Environment": r.environment,
            "Version": r.version,
            "Hash": r.hash,
            "Provider": r.provider,
            "Deployed": ago(r.deployed_at),
            "Earlier versions": r.history_count,
        }
        for r in records
    ]
)
st.dataframe(deployments, hide_index=True, width="stretch")

with_history = {f"{r.tool_key} in {r.environment}": r for r in records if r.history_count}
if with_history:
    picked = with_history[st.selectbox("History of", list(with_history))]
    # The running version first (not replaced), then what it replaced, newest first.
    timeline = [(picked, None)] + [(h, h.replaced_at) for h in picked.history]
    history = pd.DataFrame(
        [
            {
                "Status": "running" if r is None else "replaced",
                "Version": e.version,
                "Hash": e.hash,
                "Provider": e.provider,
                "Deployed": e.deployed_at,
                "Replaced": r,
            }
            for e, r in timeline
        ]
    )
    st.dataframe(
        history,
        hide_index=True,
        width="stretch",
        column_config={
            "Deployed": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
            "Replaced": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
        },
    )
    if picked.history_count > len(picked.history):
        st.caption(f"The newest {len(picked.history)} of {picked.history_count} earlier versions.")
