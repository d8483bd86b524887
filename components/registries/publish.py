"""The Publish tab (and an empty registry's first artifact): a new version of text or chat
messages, with an optional version name, labels and commit message."""

from __future__ import annotations

import streamlit as st

from api import ApiError
from api.registries import Artifact, ChatMessage, Registry
from components import layout
from components.connection import client
from components.feedback import notify, plain
from components.forms import FormFields, InvalidField, json_value
from components.permissions import control

# The artifact just published, for the browser to open on the next run.
PUBLISHED = "artifact_next"
CHAT_EXAMPLE = (
    '[\n  {"role": "system", "content": "You are …"},\n  {"role": "user", "content": "{{question}}"}\n]'
)


def parse_content(kind: str, text: str) -> str | list[ChatMessage] | list[dict[str, str]]:
    """The publish form's text as content: as it is, or a JSON list of chat messages."""
    if kind == "text":
        return text
    messages = json_value(text, "content")
    if not isinstance(messages, list):
        raise InvalidField("content", 'chat content is a JSON list: [{"role": "system", "content": "…"}, …]')
    return messages


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
        published = client().registries.publish(
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
        st.session_state[PUBLISHED] = published.name
        notify(f"{outcome} **{plain(published.name)}** {published.version}.")
