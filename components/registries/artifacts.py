"""A registry's artifact browser: its artifacts to choose from, with their latest and production
versions, and the chosen one's tabs beside them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.registries import LATEST_LABEL, PRODUCTION_LABEL, Artifact, ArtifactVersion, Registry
from components import layout
from components.connection import client
from components.feedback import load
from components.formatting import ago
from components.registries.compare import compare
from components.registries.content import show_version
from components.registries.labels import move_label_form
from components.registries.publish import PUBLISHED, publish_form
from components.registries.trial import try_prompt
from components.registries.versions import versions_history

ARTIFACT_TAB = "artifact_tab"


def choose(options: list[str], key: str, next_key: str) -> None:
    """Preselect a selectbox: what an action asked for (`next_key`), else keep a valid choice, else the first.

    Actions cannot set a drawn widget's value, so they leave the wish under `next_key` for the next run.
    """
    wished = st.session_state.pop(next_key, None)
    if wished in options:
        st.session_state[key] = wished
    elif st.session_state.get(key) not in options:
        st.session_state[key] = options[0]


def artifact_browser(registry: Registry) -> None:
    artifacts = load(
        "list artifacts", lambda: client().registries.artifacts(registry.registry_ref, limit=1000)
    ).items
    if not artifacts:
        st.info("No prompts in this registry yet: publish the first one below.", icon=":material/info:")
        publish_form(registry, None)
        return
    names = [a.name for a in artifacts]
    choose(names, "artifact_choice", PUBLISHED)
    list_col, detail_col = layout.aside("artifacts")
    name = list_col.radio("Artifact", names, key="artifact_choice", captions=[summary(a) for a in artifacts])
    artifact = next(a for a in artifacts if a.name == name)
    versions = load(
        "list versions", lambda: client().registries.versions(registry.registry_ref, name, limit=1000)
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
    # Keyed, so that the tab in use stays open when an action (Publish, a label's move) reruns the page.
    content_tab, versions_tab, diff_tab, try_tab, publish_tab, labels_tab = st.tabs(
        ["Content", "Versions", "Compare", "Try", "Publish", "Labels"], key=ARTIFACT_TAB, on_change="rerun"
    )
    with content_tab:
        show_version(registry, artifact.name, versions)
    with versions_tab:
        versions_history(versions)
    with diff_tab:
        compare(registry, artifact.name, versions)
    with try_tab:
        try_prompt(registry, artifact.name, versions)
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
