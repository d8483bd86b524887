"""The Content tab: a version of an artifact, production's (else the latest) at first, with its
template variables marked."""

from __future__ import annotations

import html

import streamlit as st

from api.registries import PRODUCTION_LABEL, TEMPLATE_VARIABLE, ArtifactVersion, Registry, RetrievedArtifact
from components.connection import client
from components.feedback import load
from components.formatting import ago
from components.registries.versions import labelled

_ROLE_AVATARS = {"system": ":material/settings:", "developer": ":material/code:", "tool": ":material/build:"}


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


def default_version(versions: list[ArtifactVersion]) -> int:
    """Where an application would land: production if set, else latest (the newest)."""
    return next((i for i, v in enumerate(versions) if PRODUCTION_LABEL in v.labels), 0)


def show_version(registry: Registry, name: str, versions: list[ArtifactVersion]) -> None:
    """The version chosen: when and why it was published, and its content."""
    chosen = st.selectbox(
        "Version",
        [v.version for v in versions],
        index=default_version(versions),
        format_func=labelled(versions),
        key=f"content_version:{registry.registry_ref}:{name}",
    )
    shown = load(
        "fetch the version",
        lambda: client().registries.retrieve(registry.registry_ref, name, version=chosen),
    )
    st.caption(
        f"Version **{shown.version}** (#{shown.number}) · published {ago(shown.created_at)} · "
        f"`{shown.content_hash[:19]}…`" + (f" · {shown.commit_message}" if shown.commit_message else "")
    )
    with st.container(border=True):
        show_content(shown)
