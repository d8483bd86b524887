"""The Labels tab: move a label to a version to promote or roll back, or, for a protected label,
request the move for another member to approve."""

from __future__ import annotations

import zlib

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from api import ApiError
from api.registries import LATEST_LABEL, PRODUCTION_LABEL, Artifact, ArtifactVersion, Registry
from components import layout
from components.changes.waiting import open_requests, pending_labels
from components.changes.wording import requester
from components.connection import client
from components.feedback import notify, plain, show_error
from components.permissions import control
from components.registries.versions import labelled

MOVED_TO = "label_moved_to"  # the version a label was last moved to: the picker stays on it


def move_label_form(registry: Registry, artifact: Artifact, versions: list[ArtifactVersion]) -> None:
    st.caption("Move a label to promote or roll back. `latest` always follows the newest version by itself.")
    movable = [label for label in artifact.labels if label != LATEST_LABEL]
    protected = set(registry.protected_labels)
    if protected:
        locked = ", ".join(f"`{label}`" for label in sorted(protected))
        st.caption(f":material/lock: {locked} protected: moved once another member approves the request.")
    waiting = pending_labels(open_requests(), registry.registry_ref)
    for (name, label), request in sorted(waiting.items()):
        if name == artifact.name:
            st.caption(
                f":material/pending_actions: Moving `{plain(label)}` to {plain(request.payload['version'])} "
                f"waits for review ({request.id}, asked by {plain(requester(request))})."
            )
    with st.form("move_label"):
        label_col, new_col, version_col = layout.fields("move_label", 3)
        # Buttons of the labels there are and a field for a new one, rather than a list that takes new
        # entries: Escape in such a list empties what was chosen.
        chosen = label_col.radio(
            "Label",
            sorted({PRODUCTION_LABEL, "staging", *movable}),
            index=None,
            horizontal=True,
            format_func=lambda name: f"🔒 {name}" if name in protected else name,
            key="label_to_move",
        )
        new_label = new_col.text_input("Or a new label", key="new_label", placeholder="canary")
        target = version_picker(version_col, versions)
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
    label = new_label.strip() or chosen
    if not label:
        st.error("Choose a label, or type a new one.", icon=":material/error:")
        return
    if request or label in protected:
        request_move(registry, artifact, label, target, reason)
        return
    try:
        client().registries.move_label(registry.registry_ref, artifact.name, label, target)
    except ApiError as error:
        show_error(error, "move the label", "artifact")
    else:
        st.session_state[MOVED_TO] = target
        notify(f"Moved **{plain(label)}** to {plain(artifact.name)} {target}.")


def version_picker(where: DeltaGenerator, versions: list[ArtifactVersion]) -> str:
    """The versions with their labels. Keyed by those labels, so that a moved label shows at once: a
    kept list goes on showing its choice as it was worded when chosen."""
    choices = [v.version for v in versions]
    worded = "|".join(f"{v.version}:{','.join(sorted(v.labels))}" for v in versions)
    moved_to = st.session_state.get(MOVED_TO)
    return where.selectbox(
        "Version",
        choices,
        index=choices.index(moved_to) if moved_to in choices else 0,
        format_func=labelled(versions),
        key=f"label_target:{zlib.crc32(worded.encode()):08x}",
    )


def request_move(registry: Registry, artifact: Artifact, label: str, target: str, reason: str) -> None:
    """A protected label's move, opened as a change request for another member to approve."""
    if not reason.strip():
        st.error(
            f"`{plain(label)}` is protected: say why in Reason, for the reviewers.", icon=":material/error:"
        )
        return
    move = {"registryRef": registry.registry_ref, "name": artifact.name, "label": label, "version": target}
    try:
        opened = client().change_requests.open("label", move, reason.strip())
    except ApiError as error:
        show_error(error, "request the move", "artifact")
    else:
        notify(
            f"Requested moving **{plain(label)}** to {plain(artifact.name)} {target} ({opened.id}): "
            "it moves once another member approves it on the Changes page."
        )
