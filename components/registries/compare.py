"""The Compare tab: two versions of an artifact side by side, line by line."""

from __future__ import annotations

import streamlit as st

from api.registries import ArtifactVersion, Registry, content_text
from components import layout
from components.connection import client
from components.diff import diff_stats, side_by_side
from components.feedback import load
from components.registries.versions import labelled


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
            "fetch a version",
            lambda v=v: client().registries.retrieve(registry.registry_ref, name, version=v),
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
