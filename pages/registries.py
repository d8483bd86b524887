"""Prompts → Registries: registries, an artifact browser (content, versions, diff), publish, labels.
The browser and each of its tabs are modules of components/registries."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.registries import PRODUCTION_LABEL, Registry
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.registries.artifacts import artifact_browser
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


def registry_table(registries: list[Registry]) -> str | None:
    table = pd.DataFrame(
        [
            {
                "Registry": r.registry_ref,
                "Visibility": r.visibility,
                "Artifacts": r.artifact_count,
                "Versions": r.version_count,
                "Protected labels": ", ".join(r.protected_labels),
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


def protection_section(registry: Registry) -> None:
    """Which labels move only through approved change requests: an admin's direct act."""
    labels = sorted({PRODUCTION_LABEL, "staging", *registry.protected_labels})
    with st.form(f"protect_labels_{registry.registry_ref}"):
        chosen = st.multiselect(
            "Protected labels",
            labels,
            default=registry.protected_labels,
            accept_new_options=True,
            placeholder="None: every label moves directly",
            key=f"protected_labels_{registry.registry_ref}",
            help="A move of one of these labels opens a change request that another member approves.",
        )
        if st.form_submit_button("Save protected labels", **control("updateRegistry")):
            try:
                saved = orgdeck.registries.update(registry.registry_ref, protected_labels=chosen)
            except ApiError as error:
                show_error(error, "protect the labels")
            else:
                protected = ", ".join(f"`{label}`" for label in saved.protected_labels) or "none"
                notify(f"Protected labels of **{plain(saved.registry_ref)}**: {protected}.")


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
    locked = ", ".join(selected.protected_labels)
    with st.expander(f"Protected labels: {locked or 'none'}", icon=":material/lock:"):
        protection_section(selected)
    with st.expander("Delete this registry"):
        delete_section(selected)

if deleted:
    with st.expander(f"Deleted registries ({len(deleted)})"):
        restore_section()
