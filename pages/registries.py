"""Prompts → Registries: registries, an artifact browser (content, versions, diff), publish, labels."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from api import ApiError
from api.registries import (
    LATEST_LABEL,
    PRODUCTION_LABEL,
    TEMPLATE_VARIABLE,
    Artifact,
    ArtifactVersion,
    ChatMessage,
    Registry,
    RetrievedArtifact,
    content_text,
)
from components import layout
from components.confirm import confirmed
from components.connection import client, current
from components.diff import diff_stats, side_by_side
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields, InvalidField
from components.permissions import control
from components.tables import chosen_row, open_linked, select

TABLE = "registries_table"

connection = current()
orgdeck = client()

st.title("Prompt registries")
st.caption(
    f"Versioned prompts of `{connection.org_slug}`. Published versions never change; labels such as "
    "`production` point at the version applications fetch. Public registries can be read without a key."
)
show_notice()

everything = load("list registries", lambda: orgdeck.registries.list(include_deleted=True, limit=1000)).items
live = [r for r in everything if r.deleted_at is None]
deleted = [r for r in everything if r.deleted_at is not None]


def choose(options: list[str], key: str, next_key: str) -> None:
    """Preselect a selectbox: what an action asked for (`next_key`), else keep a valid choice, else the first.

    Actions cannot set a drawn widget's value, so they leave the wish under `next_key` for the next run.
    """
    wished = st.session_state.pop(next_key, None)
    if wished in options:
        st.session_state[key] = wished
    elif st.session_state.get(key) not in options:
        st.session_state[key] = options[0]


def registry_table(registries: list[Registry]) -> str | None:
    table = pd.DataFrame(
        [
            {
                "Registry": r.registry_ref,
                "Visibility": r.visibility,
                "Artifacts": r.artifact_count,
                "Versions": r.version_count,
                "Description": r.description,
                "Created": ago(r.created_at),
            }
            for r in registries
        ]
    )
    open_linked(TABLE, lambda linked: next((r.registry_ref for r in registries if r.id == linked), None))
    return chosen_row(table, [r.registry_ref for r in registries], key=TABLE, width="stretch")


def create_registry_form() -> None:
    with st.form("create_registry"):
        fields = FormFields("registry")
        name = fields.text_input("name", key="new_registry_name")
        visibility = st.radio(
            "Visibility", ["private", "public"], horizontal=True, key="new_registry_visibility"
        )
        description = fields.text_input("description", key="new_registry_description")
        if st.form_submit_button("Create registry", type="primary", **control("createRegistry")):
            try:
                created = orgdeck.registries.create(name, visibility=visibility, description=description)
            except ApiError as error:
                fields.show(error, "create the registry")
            else:
                fields.clear()
                select(TABLE, created.registry_ref)
                notify(f"Created registry **{plain(created.registry_ref)}**.")


def highlighted(text: str) -> str:
    """The text as HTML, with every {{variable}} marked."""
    escaped = html.escape(text)
    marked = TEMPLATE_VARIABLE.sub(
        lambda m: f'<mark style="padding:0 2px;border-radius:3px">{m.group(0)}</mark>', escaped
    )
    return f'<div style="white-space:pre-wrap;font-family:monospace;font-size:14px">{marked}</div>'


def show_content(version: RetrievedArtifact) -> None:
    if version.variables:
        st.markdown("Variables: " + " ".join(f"`{{{{{name}}}}}`" for name in version.variables))
    if isinstance(version.content, str):
        st.markdown(highlighted(version.content), unsafe_allow_html=True)
        return
    for message in version.content:
        with st.chat_message(message.role, avatar=_ROLE_AVATARS.get(message.role)):
            st.caption(message.role)
            st.markdown(highlighted(message.content), unsafe_allow_html=True)


_ROLE_AVATARS = {"system": ":material/settings:", "developer": ":material/code:", "tool": ":material/build:"}


def labelled(versions: list[ArtifactVersion]) -> Callable[[str], str]:
    """How a version is offered in a list: `3 · latest, production`."""
    labels = {v.version: v.labels for v in versions}
    return lambda version: f"{version} · {', '.join(labels[version])}" if labels[version] else version


def default_version(versions: list[ArtifactVersion]) -> int:
    """Where an application would land: production if set, else latest (the newest)."""
    return next((i for i, v in enumerate(versions) if PRODUCTION_LABEL in v.labels), 0)


MAX_NAMED_TICKS = 20


def versions_chart(versions: list[ArtifactVersion]) -> go.Figure:
    """When each version was published, with the labels on it: where production lags behind latest."""
    ordered = sorted(versions, key=lambda v: v.number)
    figure = go.Figure(
        go.Scatter(
            x=[v.created_at for v in ordered],
            y=[v.number for v in ordered],
            mode="lines+markers+text",
            text=[", ".join(label for label in v.labels) for v in ordered],
            textposition="top center",
            hovertext=[f"{v.version}: {v.commit_message or 'no message'}" for v in ordered],
            hoverinfo="text+x",
            marker={"size": 9},
        )
    )
    figure.update_layout(height=280, margin={"l": 10, "r": 10, "t": 20, "b": 10}, showlegend=False)
    figure.update_yaxes(title="version", range=[ordered[0].number - 0.5, ordered[-1].number + 0.8])
    if len(ordered) <= MAX_NAMED_TICKS:
        # One tick per version, named as people know it (1.4.0 rather than its number).
        figure.update_yaxes(tickvals=[v.number for v in ordered], ticktext=[v.version for v in ordered])
    return figure


def artifact_browser(registry: Registry) -> None:
    artifacts = load(
        "list artifacts", lambda: orgdeck.registries.artifacts(registry.registry_ref, limit=1000)
    ).items
    if not artifacts:
        st.info("No prompts in this registry yet: publish the first one below.", icon=":material/info:")
        publish_form(registry, None)
        return
    names = [a.name for a in artifacts]
    choose(names, "artifact_choice", "artifact_next")
    list_col, detail_col = layout.aside("artifacts")
    name = list_col.radio("Artifact", names, key="artifact_choice", captions=[summary(a) for a in artifacts])
    artifact = next(a for a in artifacts if a.name == name)
    versions = load(
        "list versions", lambda: orgdeck.registries.versions(registry.registry_ref, name, limit=1000)
    ).items
    with detail_col:
        artifact_details(registry, artifact, versions)
    with st.expander(f"All {len(artifacts)} artifacts and their labels"):
        artifact_table(artifacts)


def summary(artifact: Artifact) -> str:
    production = artifact.labels.get(PRODUCTION_LABEL)
    shown = f"latest {artifact.latest_version}"
    return f"{shown} · production {production}" if production else shown


def artifact_details(registry: Registry, artifact: Artifact, versions: list[ArtifactVersion]) -> None:
    name = artifact.name
    content_tab, versions_tab, diff_tab, publish_tab, labels_tab = st.tabs(
        ["Content", "Versions", "Compare", "Publish", "Labels"]
    )
    with content_tab:
        chosen = st.selectbox(
            "Version",
            [v.version for v in versions],
            index=default_version(versions),
            format_func=labelled(versions),
            key=f"content_version:{registry.registry_ref}:{name}",
        )
        shown = load(
            "fetch the version",
            lambda: orgdeck.registries.retrieve(registry.registry_ref, name, version=chosen),
        )
        st.caption(
            f"Version **{shown.version}** (#{shown.number}) · published {ago(shown.created_at)} · "
            f"`{shown.content_hash[:19]}…`" + (f" · {shown.commit_message}" if shown.commit_message else "")
        )
        with st.container(border=True):
            show_content(shown)
    with versions_tab:
        st.plotly_chart(versions_chart(versions), width="stretch")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "Version": v.version,
                        "#": v.number,
                        "Labels": ", ".join(v.labels),
                        "Type": v.content_type,
                        "Variables": ", ".join(v.variables),
                        "Message": v.commit_message,
                        "Published": ago(v.created_at),
                    }
                    for v in versions
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    with diff_tab:
        compare(registry, name, versions)
    with publish_tab:
        publish_form(registry, artifact)
    with labels_tab:
        move_label_form(registry, artifact, versions)


def artifact_table(artifacts: list[Artifact]) -> None:
    table = pd.DataFrame(
        [
            {
                "Artifact": a.name,
                "Latest": a.latest_version,
                "Production": a.labels.get(PRODUCTION_LABEL, "—"),
                "Other labels": ", ".join(
                    f"{label}→{version}"
                    for label, version in a.labels.items()
                    if label not in {LATEST_LABEL, PRODUCTION_LABEL}
                ),
                "Versions": a.version_count,
                "Updated": ago(a.updated_at),
            }
            for a in artifacts
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch")


def compare(registry: Registry, name: str, versions: list[ArtifactVersion]) -> None:
    if len(versions) < 2:
        st.info("Only one version so far: publish another to compare.")
        return
    options, shown_as = [v.version for v in versions], labelled(versions)
    old_col, new_col = layout.fields(f"compare_{registry.registry_ref}_{name}", 2)
    old = old_col.selectbox(
        "From", options, index=1, format_func=shown_as, key=f"diff_from:{registry.registry_ref}:{name}"
    )
    new = new_col.selectbox(
        "To", options, index=0, format_func=shown_as, key=f"diff_to:{registry.registry_ref}:{name}"
    )
    left, right = (
        load(
            "fetch a version", lambda v=v: orgdeck.registries.retrieve(registry.registry_ref, name, version=v)
        )
        for v in (old, new)
    )
    left_text, right_text = content_text(left.content), content_text(right.content)
    stats = diff_stats(left_text, right_text)
    if stats.identical:
        st.success(f"Versions {old} and {new} have the same content.")
        return
    st.caption(f"{stats.added} lines added, {stats.removed} removed between {old} and {new}")
    st.html(side_by_side(left_text, right_text, left_title=f"Version {old}", right_title=f"Version {new}"))


def parse_content(kind: str, text: str) -> str | list[ChatMessage] | list[dict[str, str]]:
    """The publish form's text as content: as it is, or a JSON list of chat messages."""
    if kind == "text":
        return text
    try:
        messages = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidField("content", f"not valid JSON: {error.msg} (line {error.lineno})") from error
    if not isinstance(messages, list):
        raise InvalidField("content", 'chat content is a JSON list: [{"role": "system", "content": "…"}, …]')
    return messages


CHAT_EXAMPLE = (
    '[\n  {"role": "system", "content": "You are …"},\n  {"role": "user", "content": "{{question}}"}\n]'
)


def publish_form(registry: Registry, artifact: Artifact | None) -> None:
    kind = st.radio(
        "Content", ["text", "chat"], horizontal=True, key="publish_kind", format_func=str.capitalize
    )
    # Keyed by what is published into, so that each artifact's form starts from its own name.
    base = f"publish:{registry.registry_ref}:{artifact.name if artifact else ''}"
    with st.form("publish"):
        fields = FormFields("artifact")
        name = fields.text_input("name", key=f"{base}:name", value=artifact.name if artifact else "")
        text = fields.text_area(
            "content",
            key=f"{base}:content:{kind}",
            label="Prompt" if kind == "text" else "Messages (JSON)",
            height=220,
            placeholder="Use {{variable}} for what the application fills in."
            if kind == "text"
            else CHAT_EXAMPLE,
        )
        version_col, labels_col = layout.fields("publish_version_labels", 2)
        version = fields.text_input(
            "version", key=f"{base}:version", where=version_col, label="Version (optional)"
        )
        labels = fields.text_input(
            "labels", key=f"{base}:labels", where=labels_col, label="Labels (optional)"
        )
        message = fields.text_input("commitMessage", key=f"{base}:message")
        if not st.form_submit_button("Publish", type="primary", **control("publishArtifact")):
            return
    try:
        published = orgdeck.registries.publish(
            registry.registry_ref,
            name.strip(),
            parse_content(kind, text),
            version=version.strip() or None,
            labels=[label.strip() for label in labels.split(",") if label.strip()],
            commit_message=message,
        )
    except (InvalidField, ApiError) as error:
        fields.show(error, "publish")
    else:
        fields.clear()
        outcome = "Published" if published.created else "Already published (same content):"
        st.session_state["artifact_next"] = published.name
        notify(f"{outcome} **{plain(published.name)}** {published.version}.")


def move_label_form(registry: Registry, artifact: Artifact, versions: list[ArtifactVersion]) -> None:
    st.caption("Move a label to promote or roll back. `latest` always follows the newest version by itself.")
    movable = [label for label in artifact.labels if label != LATEST_LABEL]
    protected = set(registry.protected_labels)
    if protected:
        locked = ", ".join(f"`{label}`" for label in sorted(protected))
        st.caption(f":material/lock: {locked} protected: moved once another member approves the request.")
    with st.form("move_label"):
        label_col, version_col = layout.fields("move_label", 2)
        label = label_col.selectbox(
            "Label",
            sorted({PRODUCTION_LABEL, "staging", *movable}),
            index=None,
            accept_new_options=True,
            format_func=lambda name: f"🔒 {name}" if name in protected else name,
            key="label_to_move",
        )
        target = version_col.selectbox(
            "Version", [v.version for v in versions], format_func=labelled(versions), key="label_target"
        )
        reason = st.text_input("Reason (for a protected label)", key="label_reason") if protected else ""
        buttons = st.container(horizontal=True)
        move = buttons.form_submit_button("Move label", type="primary", **control("moveLabel"))
        request = (
            buttons.form_submit_button("Request move", icon=":material/lock:", **control("openChangeRequest"))
            if protected
            else False
        )
        if not (move or request):
            return
    if not label:
        st.error("Choose or type a label.", icon=":material/error:")
        return
    if request or label in protected:
        request_move(registry, artifact, label, target, reason)
        return
    try:
        orgdeck.registries.move_label(registry.registry_ref, artifact.name, label, target)
    except ApiError as error:
        show_error(error, "move the label", "artifact")
    else:
        notify(f"Moved **{plain(label)}** to {plain(artifact.name)} {target}.")


def request_move(registry: Registry, artifact: Artifact, label: str, target: str, reason: str) -> None:
    """A protected label's move, opened as a change request for another member to approve."""
    if not reason.strip():
        st.error(
            f"`{plain(label)}` is protected: say why in Reason, for the reviewers.", icon=":material/error:"
        )
        return
    move = {"registryRef": registry.registry_ref, "name": artifact.name, "label": label, "version": target}
    try:
        opened = orgdeck.change_requests.open("label", move, reason.strip())
    except ApiError as error:
        show_error(error, "request the move", "artifact")
    else:
        notify(
            f"Requested moving **{plain(label)}** to {plain(artifact.name)} {target} ({opened.id}): "
            "it moves once another member approves it on the Changes page."
        )


def delete_section(registry: Registry) -> None:
    warning = (
        f"Delete **{registry.registry_ref}**? Its {registry.artifact_count} artifacts stop being served "
        "(404) at once. Nothing is erased: the registry can be restored."
    )
    if confirmed(
        "Delete registry",
        key=f"delete_registry_{registry.registry_ref}",
        warning=warning,
        **control("deleteRegistry"),
    ):
        try:
            orgdeck.registries.delete(registry.registry_ref)
        except ApiError as error:
            show_error(error, "delete the registry")
        else:
            notify(f"Deleted **{plain(registry.registry_ref)}**; it can be restored below.")


def restore_section() -> None:
    refs = {r.registry_ref: r for r in deleted}
    choice = st.selectbox("Deleted registry", list(refs), index=None, placeholder="Choose one to restore")
    if choice is None:
        return
    warning = f"Restore **{choice}**? Its artifacts are served again, to everyone it was shared with."
    if confirmed(
        "Restore registry", key=f"restore_registry_{choice}", warning=warning, **control("restoreRegistry")
    ):
        try:
            orgdeck.registries.restore(choice)
        except ApiError as error:
            show_error(error, "restore the registry")
        else:
            select(TABLE, choice)
            notify(f"Restored **{plain(choice)}**.")


if not live:
    st.info("No registries yet: create one to publish prompts into.", icon=":material/info:")
    create_registry_form()
else:
    ref = registry_table(live)
    with st.popover("New registry", icon=":material/add:"):
        create_registry_form()
    selected = next(r for r in live if r.registry_ref == ref)
    st.subheader(selected.registry_ref, divider="gray")
    artifact_browser(selected)
    with st.expander("Delete this registry"):
        delete_section(selected)

if deleted:
    with st.expander(f"Deleted registries ({len(deleted)})"):
        restore_section()
