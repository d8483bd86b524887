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
from components import layout
from components.charts import PLOT_CONFIG
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields, InvalidField
from components.permissions import control
from components.tables import chosen_row, open_linked, select

ALL = "All"
TABLE = "tools_table"
TILE_WIDTH = 200
SCHEMA_TEMPLATE = json.dumps(
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}, indent=2
)

connection = current()
orgdeck = client()


def parse_schema(text: str) -> dict[str, Any]:
    """The schema typed in (the service checks that it describes an object)."""
    if not text.strip():
        return dict(EMPTY_INPUT_SCHEMA)
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidField(
            "inputSchema", f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from error
    if not isinstance(schema, dict):
        raise InvalidField("inputSchema", 'must be a JSON object, like {"type": "object", "properties": {}}')
    return schema


def arguments(tool: Tool) -> str:
    """`query*, limit`: the argument names, required ones starred."""
    required = set(tool.input_schema.get("required", []))
    names = tool.input_schema.get("properties", {})
    return ", ".join(f"{name}*" if name in required else name for name in names)


def edit_panel(tool: Tool) -> None:
    with st.form(f"edit_tool_{tool.id}"):
        fields = FormFields("tool")
        name = fields.text_input("name", key=f"edit_tool_name_{tool.id}", value=tool.name)
        description = fields.text_area(
            "description", key=f"edit_tool_description_{tool.id}", value=tool.description
        )
        schema_text = fields.text_area(
            "inputSchema",
            key=f"edit_tool_schema_{tool.id}",
            label="Input schema (JSON)",
            value=json.dumps(tool.input_schema, indent=2),
            height=220,
        )
        if st.form_submit_button("Save changes", type="primary", **control("updateTool")):
            try:
                orgdeck.tools.update(
                    tool.id, name=name, description=description, input_schema=parse_schema(schema_text)
                )
            except (InvalidField, ApiError) as error:
                fields.show(error, "save the tool")
            else:
                notify(f"Saved **{plain(name)}**.")
    warning = f"Delete **{plain(tool.name)}** (`{tool.tool_key}`)? Records of its deployments stay."
    if confirmed("Delete tool", key=f"delete_tool_{tool.id}", warning=warning, **control("deleteTool")):
        try:
            orgdeck.tools.delete(tool.id)
        except ApiError as error:
            show_error(error, "delete the tool")
        else:
            notify(f"Deleted tool **{plain(tool.name)}**.")


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
show_notice()

tools = load("list tools", lambda: orgdeck.tools.list(limit=MAX_PAGE_SIZE)).items
every_record = load("list tool deployments", lambda: orgdeck.tool_deployments.list(limit=MAX_PAGE_SIZE)).items

tiles = st.container(horizontal=True, gap="small")
tiles.metric("Tools", len(tools), width=TILE_WIDTH)
tiles.metric("Deployment records", len(every_record), width=TILE_WIDTH)
tiles.metric("Environments with tools", len({r.environment for r in every_record}), width=TILE_WIDTH)

chosen_id = None
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
    st.caption("Select a tool to edit or delete it.")
    open_linked(TABLE)
    chosen_id = chosen_row(catalogue, [t.id for t in tools], key=TABLE, width="stretch")
else:
    st.info("No tools yet. Register the first one below with the JSON Schema of its input.")

with (
    st.expander("Register a tool", expanded=not tools, icon=":material/add:"),
    st.form("create_tool"),
):
    fields = FormFields("tool")
    name_col, key_col = layout.fields("new_tool_names", 2)
    name = fields.text_input("name", key="new_tool_name", where=name_col)
    tool_key = fields.text_input("toolKey", key="new_tool_key", where=key_col)
    description = fields.text_input("description", key="new_tool_description")
    schema_text = fields.text_area(
        "inputSchema", key="new_tool_schema", label="Input schema (JSON)", value=SCHEMA_TEMPLATE, height=180
    )
    if st.form_submit_button("Register tool", type="primary", **control("createTool")):
        try:
            created = orgdeck.tools.create(
                name, tool_key.strip(), description=description, input_schema=parse_schema(schema_text)
            )
        except (InvalidField, ApiError) as error:
            fields.show(error, "register the tool")
        else:
            fields.clear()
            select(TABLE, created.id)
            notify(f"Registered **{plain(created.name)}** (`{created.tool_key}`).")

if chosen_id is not None:
    chosen = next(t for t in tools if t.id == chosen_id)
    with st.expander(f"Edit or delete {chosen.name}", icon=":material/edit:"):
        edit_panel(chosen)

st.subheader("Deployments")
if not every_record:
    st.info("No tool deployment records yet. Pipelines report them with POST /agents/tool-deployments.")
    st.stop()

tool_filter_col, environment_filter_col = layout.fields("tool_record_filters", 2)
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

st.plotly_chart(version_matrix(records), width="stretch", config=PLOT_CONFIG)
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
