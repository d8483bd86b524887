"""Environments: deployment targets, their secrets (add, rotate, delete; values never shown) and the
signing keys of webhook targets."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.changes import MAX_REQUIRED_APPROVALS, ChangeRequest
from api.common import MAX_PAGE_SIZE
from api.environments import Environment, Secret
from components import layout
from components.changes.waiting import REQUEST_QUERY, open_requests, pending_for
from components.changes.wording import KIND_LABELS, approvals_text, requester
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.protection import PROTECTED_ICON, approvals, badge
from components.rollout_settings import rollout_settings_panel
from components.tables import chosen_row, open_linked, select

TARGETS = {"builtin": "Built-in (recorded by Orgdeck)", "webhook": "Webhook (a signed manifest is POSTed)"}
TABLE = "environments_table"
NEW_SIGNING_KEY = "new_signing_key"
TILE_WIDTH = 200

connection = current()
orgdeck = client()


def secrets_panel(secrets: list[Secret], *, environment_id: str | None, scope: str) -> None:
    """The secrets of one scope: names and versions, a form to add or rotate, a delete."""
    scope_key = environment_id or "org"
    if secrets:
        table = pd.DataFrame(
            [
                {"Name": s.name, "Version": s.version, "Updated": ago(s.updated_at), "Id": s.id}
                for s in secrets
            ]
        )
        st.dataframe(table, hide_index=True, width="stretch")
    else:
        st.caption(f"No secrets {scope} yet.")
    with st.form(f"set_secret_{scope_key}"):
        fields = FormFields("secret")
        name_col, value_col = layout.fields(f"secret_{scope_key}", 2)
        name = fields.text_input(
            "name",
            key=f"secret_name_{scope_key}",
            where=name_col,
            help="Upper-case letters, digits and underscores, starting with a letter. An existing name "
            "gets the new value as its next version (rotation).",
        )
        value = fields.text_input("value", key=f"secret_value_{scope_key}", where=value_col, type="password")
        if st.form_submit_button("Save secret", type="primary", **control("setSecret")):
            try:
                saved = orgdeck.environments.secrets.set(name.strip(), value, environment_id=environment_id)
            except ApiError as error:
                fields.show(error, "save the secret")
            else:
                # Forget the typed value now, not only in the browser: session state outlives the form.
                fields.clear()
                action = "Stored" if saved.version == 1 else f"Rotated to version {saved.version}:"
                notify(
                    f"{action} **{saved.name}** {scope}. The value is encrypted and will not be shown again."
                )
    if secrets:
        by_label = {f"{s.name} (v{s.version})": s for s in secrets}
        choice = st.selectbox(
            "Delete a secret",
            list(by_label),
            index=None,
            placeholder="Choose",
            key=f"delete_pick_{scope_key}",
        )
        if choice:
            doomed = by_label[choice]
            warning = f"Delete **{doomed.name}** {scope}? Deployments that use it will fail to resolve it."
            if confirmed(
                "Delete secret", key=f"delete_secret_{doomed.id}", warning=warning, **control("deleteSecret")
            ):
                try:
                    orgdeck.environments.secrets.delete(doomed.id)
                except ApiError as error:
                    show_error(error, "delete the secret")
                else:
                    notify(f"Deleted **{doomed.name}** {scope}.")


def settings_panel(environment: Environment, environments: list[Environment]) -> None:
    with st.form(f"edit_environment_{environment.id}"):
        fields = FormFields("environment")
        description = fields.text_area(
            "description", key=f"edit_description_{environment.id}", value=environment.description
        )
        target = st.radio(
            "Target",
            list(TARGETS),
            format_func=TARGETS.__getitem__,
            index=list(TARGETS).index(environment.target),
            horizontal=True,
            key=f"edit_target_{environment.id}",
        )
        webhook_url = fields.text_input(
            "webhookUrl", key=f"edit_webhook_url_{environment.id}", value=environment.webhook_url or ""
        )
        if st.form_submit_button("Save changes", **control("updateEnvironment")):
            changes = {"description": description, "target": target}
            if target == "webhook":
                changes["webhook_url"] = webhook_url.strip()
            try:
                orgdeck.environments.update(environment.id, **changes)
            except ApiError as error:
                fields.show(error, "save the environment")
            else:
                notify(f"Saved **{environment.name}**.")
    rollout_settings_panel(environment, environments)
    protection_panel(environment)
    warning = (
        f"Delete **{environment.name}** and its {environment.secret_count} secrets? "
        "Its tool deployment records go too. This cannot be undone."
    )
    if confirmed(
        "Delete environment",
        key=f"delete_environment_{environment.id}",
        warning=warning,
        **control("deleteEnvironment"),
    ):
        try:
            orgdeck.environments.delete(environment.id)
        except ApiError as error:
            show_error(error, "delete the environment")
        else:
            notify(f"Deleted environment **{environment.name}**.")


def protection_panel(environment: Environment) -> None:
    """Whether deployments here (and changes to where they go and what they carry) wait for
    approval, and how many approvals: an admin's direct act, never itself a change request."""
    st.markdown("**Protection**")
    with st.form(f"protect_environment_{environment.id}"):
        protected = st.toggle(
            "Protected: deployments and changes to its target and secrets need approval",
            value=environment.protected,
            key=f"edit_protected_{environment.id}",
        )
        required = st.number_input(
            "Approvals needed",
            min_value=1,
            max_value=MAX_REQUIRED_APPROVALS,
            value=environment.required_approvals,
            step=1,
            key=f"edit_required_approvals_{environment.id}",
            help=f"Members other than the requester who must approve, 1 to {MAX_REQUIRED_APPROVALS}.",
        )
        if st.form_submit_button("Save protection", **control("updateEnvironment", at_least="admin")):
            try:
                saved = orgdeck.environments.update(
                    environment.id, protected=protected, required_approvals=int(required)
                )
            except ApiError as error:
                show_error(error, "save the protection")
            else:
                state = badge(saved) or "not protected: deployments run directly"
                notify(f"**{plain(saved.name)}** is {state}.")


def pending_notice(pending: list[ChangeRequest]) -> None:
    """What waits for review here, so nobody asks twice or changes it under a reviewer's feet."""
    for request in pending:
        with st.container(horizontal=True, vertical_alignment="center"):
            st.info(
                f"**{KIND_LABELS[request.kind]} waiting for review:** {plain(request.reason)} "
                f"(asked by {plain(requester(request))} {ago(request.created_at)}, {approvals_text(request)})",
                icon=":material/pending_actions:",
                width="stretch",
            )
            st.page_link(
                "pages/changes.py",
                label="Review it",
                query_params={REQUEST_QUERY: request.id},
                width="content",
            )


def signing_key_panel(environment: Environment) -> None:
    """A webhook target's signing key: made or replaced here, its value shown this once."""
    st.markdown("**Signing key**")
    shown = st.session_state.pop(NEW_SIGNING_KEY, None)
    if shown is not None and shown["environment_id"] == environment.id:
        st.warning(
            "Copy the key now (the copy button is at the right of the box) into the receiver's "
            "configuration: it is shown this once.",
            icon=":material/key:",
        )
        st.code(shown["secret"], language=None)
    created = environment.signing_key_created_at
    if created is None:
        st.info(
            "No signing key yet, so deployments to this environment are refused. Each deployment is "
            "sent signed with this key (Standard Webhooks), and the receiver checks the signature "
            "before it trusts the manifest.",
            icon=":material/key_off:",
        )
        if st.button(
            "Create signing key",
            type="primary",
            key=f"create_key_{environment.id}",
            **control("createSigningKey"),
        ):
            make_signing_key(environment)
        return
    st.caption(f"Created {ago(created)} ({created:%Y-%m-%d %H:%M} UTC).")
    warning = (
        f"Replace the signing key of **{plain(environment.name)}**? Deployments are signed with the new "
        "key at once: the receiver refuses them until it has the new key too."
    )
    if confirmed(
        "Rotate signing key",
        key=f"rotate_key_{environment.id}",
        warning=warning,
        **control("createSigningKey"),
    ):
        make_signing_key(environment)


def make_signing_key(environment: Environment) -> None:
    try:
        key = orgdeck.deployments.create_signing_key(environment.id)
    except ApiError as error:
        show_error(error, "create the signing key")
        return
    st.session_state[NEW_SIGNING_KEY] = {"environment_id": environment.id, "secret": key.secret}
    notify(f"Made a new signing key for **{plain(environment.name)}**.")


def create_form(*, expanded: bool) -> None:
    with (
        st.expander("New environment", expanded=expanded, icon=":material/add:"),
        st.form("create_environment"),
    ):
        fields = FormFields("environment")
        name = fields.text_input("name", key="new_environment_name")
        description = fields.text_input("description", key="new_environment_description")
        target = st.radio(
            "Target",
            list(TARGETS),
            format_func=TARGETS.__getitem__,
            horizontal=True,
            key="new_environment_target",
        )
        webhook_url = fields.text_input("webhookUrl", key="new_environment_webhook_url")
        if st.form_submit_button("Create environment", type="primary", **control("createEnvironment")):
            try:
                created = orgdeck.environments.create(
                    name.strip(),
                    description=description,
                    target=target,
                    webhook_url=webhook_url.strip() if target == "webhook" else None,
                )
            except ApiError as error:
                fields.show(error, "create the environment")
            else:
                fields.clear()
                select(TABLE, created.id)
                follow_up = (
                    " Create its signing key below before deploying." if created.target == "webhook" else ""
                )
                notify(f"Created environment **{plain(created.name)}**.{follow_up}")


def overview_table(environments: list[Environment]) -> str | None:
    frame = pd.DataFrame(
        [
            {
                "Name": e.name,
                "Target": e.target,
                "Protection": badge(e),
                "Secrets": e.secret_count,
                "Signing key": ("set" if e.signing_key_created_at else "missing")
                if e.target == "webhook"
                else "",
                "Last deployment": e.last_deployment.status if e.last_deployment else "",
            }
            for e in environments
        ]
    )
    open_linked(TABLE)
    return chosen_row(frame, [e.id for e in environments], key=TABLE, width="stretch")


st.title("Environments")
st.caption(
    "Where agents run. A built-in target records deployments here; a webhook target receives each "
    "deployment as a signed manifest. Secrets are encrypted at rest and no screen shows a value again."
)
show_notice()

environments = load("list environments", lambda: orgdeck.environments.list(limit=MAX_PAGE_SIZE)).items
all_secrets = load("list secrets", lambda: orgdeck.environments.secrets.list(limit=MAX_PAGE_SIZE)).items
org_wide = [s for s in all_secrets if s.environment_id is None]

tiles = st.container(horizontal=True, gap="small")
tiles.metric("Environments", len(environments), width=TILE_WIDTH)
tiles.metric("Webhook targets", sum(e.target == "webhook" for e in environments), width=TILE_WIDTH)
tiles.metric("Environment secrets", sum(e.secret_count for e in environments), width=TILE_WIDTH)
tiles.metric("Organization-wide secrets", len(org_wide), width=TILE_WIDTH)

chosen_id = None
if environments:
    st.caption("Select an environment to see its secrets and settings.")
    chosen_id = overview_table(environments)
else:
    st.info("No environments yet. Create the first one below, for instance `staging` and then `production`.")

create_form(expanded=not environments)

if chosen_id is not None:
    chosen = next(e for e in environments if e.id == chosen_id)
    st.subheader(chosen.name, divider="gray")
    st.caption(
        " · ".join(
            part
            for part in (
                plain(chosen.description),
                f"webhook {plain(chosen.webhook_url)}" if chosen.webhook_url else "",
                f"updated {ago(chosen.updated_at)}",
            )
            if part
        )
    )
    pending_notice(pending_for(load("list open change requests", open_requests), chosen.id))
    if chosen.protected:
        st.markdown(
            f"{PROTECTED_ICON} **{badge(chosen)}**: a deployment here, or a change to its target or "
            f"secrets, is a change request that applies once it has {approvals(chosen.required_approvals)} "
            "from other members, on the Changes page."
        )
    secrets_col, settings_col = layout.panes("environment", 2)
    with secrets_col:
        st.markdown(f"**Secrets of `{chosen.name}`**")
        own = [s for s in all_secrets if s.environment_id == chosen.id]
        secrets_panel(own, environment_id=chosen.id, scope=f"in {chosen.name}")
    with settings_col:
        if chosen.target == "webhook":
            signing_key_panel(chosen)
        st.markdown("**Settings**")
        settings_panel(chosen, environments)

st.subheader("Organization-wide secrets")
st.caption("Available in every environment; an environment's own secret of the same name takes precedence.")
secrets_panel(org_wide, environment_id=None, scope="organization-wide")
