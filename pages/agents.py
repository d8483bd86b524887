"""Agents: the catalogue (filter, create), and per agent its draft, edits, versions and their diff."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.agents import Agent, AgentVersion
from api.common import MAX_PAGE_SIZE
from api.fleets import Fleet
from components import layout
from components.confirm import confirmed
from components.connection import client, current
from components.diff import diff_stats, side_by_side
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields, InvalidField
from components.permissions import control
from components.tables import chosen_row, open_linked, select

TABLE = "agents_table"
NO_FLEET = "No fleet"
DRAFT = "Draft"
BOUND = "query-params"

connection = current()
orgdeck = client()


def parse_json_object(text: str, field: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise InvalidField(field, f"not valid JSON: {error.msg} (line {error.lineno})") from error
    if not isinstance(value, dict):
        raise InvalidField(field, 'must be a JSON object, like {"model": "gpt-4o"}')
    return value


def parse_tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.split(",") if tag.strip()]


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


def version_state(agent: Agent) -> str:
    if agent.latest_version is None:
        return "never snapshotted"
    suffix = " + unversioned changes" if agent.has_unversioned_changes else ""
    return f"v{agent.latest_version}{suffix}"


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
        "provider_config": parse_json_object(typed["provider_config"], "providerConfig"),
        "prompt_references": parse_json_object(typed["prompt_references"], "promptReferences"),
    }


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


def edit_form(agent: Agent, fleets: list[Fleet]) -> None:
    with st.form(f"edit_agent_{agent.stable_key}"):
        fields = FormFields("agent")
        name = fields.text_input("name", key=f"edit_{agent.stable_key}_name", value=agent.name)
        typed = config_fields(fields, agent, key=f"edit_{agent.stable_key}")
        fleet_id = fleet_picker("Fleet", fleets, agent.fleet_id, key=f"edit_{agent.stable_key}_fleet")
        fields.slot("fleetId")
        if st.form_submit_button("Save draft", type="primary", **control("updateAgent")):
            try:
                orgdeck.agents.update(
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


def versions_table(versions: list[AgentVersion]) -> None:
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


def compare(agent: Agent, versions: list[AgentVersion]) -> None:
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


def detail(agent: Agent, fleets: list[Fleet]) -> None:
    fleet_names = {fleet.id: fleet.name for fleet in fleets}
    st.subheader(agent.name, anchor=False)
    head = st.container(horizontal=True, vertical_alignment="center")
    head.markdown(
        f"`{agent.stable_key}` · {plain(agent.provider)} · "
        f"{plain(fleet_names.get(agent.fleet_id or '', NO_FLEET))} · **{version_state(agent)}**",
        width="stretch",
    )
    if head.button(
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
    versions = load(
        "list versions", lambda: orgdeck.agents.versions(agent.stable_key, limit=MAX_PAGE_SIZE)
    ).items
    draft_tab, edit_tab, versions_tab, diff_tab, deployments_tab = st.tabs(
        ["Draft", "Edit", f"Versions ({len(versions)})", "Compare", "Deployments"]
    )
    with draft_tab:
        st.code(pretty(draft_of(agent)), language="json")
        st.caption(f"Tags: {', '.join(agent.tags) or 'none'} · updated {ago(agent.updated_at)}")
    with edit_tab:
        edit_form(agent, fleets)
        warning = (
            f"Archive **{agent.stable_key}**? It and its versions disappear from every list; "
            "its key stays taken. This cannot be undone from the console."
        )
        if confirmed(
            "Archive agent", key=f"archive_{agent.stable_key}", warning=warning, **control("archiveAgent")
        ):
            try:
                orgdeck.agents.archive(agent.stable_key)
            except ApiError as error:
                show_error(error, "archive the agent")
            else:
                notify(f"Archived **{plain(agent.stable_key)}**.")
    with versions_tab:
        if versions:
            versions_table(versions)
        else:
            st.info("No versions yet: **Snapshot version** freezes the draft as version 1.")
    with diff_tab:
        if versions:
            compare(agent, versions)
        else:
            st.info("Nothing to compare until the agent has a version.")
    with deployments_tab:
        deployments(agent)


def deployments(agent: Agent) -> None:
    """The agent's newest deployments, and the way to all of them."""
    page = load("load its deployments", lambda: orgdeck.deployments.history(agent=agent.stable_key, limit=10))
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
                "Provider": a.provider,
                "Model": str(a.provider_config.get("model", "")),
                "Fleet": fleet_names.get(a.fleet_id or "", ""),
                "Version": f"v{a.latest_version}" if a.latest_version else "",
                "Unversioned edits": a.has_unversioned_changes,
                "Tags": a.tags,
                "Updated": ago(a.updated_at),
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
            "Tags": st.column_config.ListColumn(),
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
