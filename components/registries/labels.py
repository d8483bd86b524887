"""The Labels tab: move a label to a version to promote or roll back, or, for a protected label,
request the move for another member to approve."""

from __future__ import annotations

import streamlit as st

from api import ApiError
from api.registries import LATEST_LABEL, PRODUCTION_LABEL, Artifact, ArtifactVersion, Registry
from components import layout
from components.changes.waiting import open_requests, pending_labels
from components.changes.wording import requester
from components.connection import client
from components.feedback import notify, plain, show_error
from components.permissions import control
from components.registries.versions import labelled


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
        client().registries.move_label(registry.registry_ref, artifact.name, label, target)
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
        opened = client().change_requests.open("label", move, reason.strip())
    except ApiError as error:
        show_error(error, "request the move", "artifact")
    else:
        notify(
            f"Requested moving **{plain(label)}** to {plain(artifact.name)} {target} ({opened.id}): "
            "it moves once another member approves it on the Changes page."
        )
