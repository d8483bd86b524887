"""Environments: deployment targets and their secrets (add, rotate, delete; values never shown)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.common import MAX_PAGE_SIZE
from api.environments import Environment, Secret
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, show_error
from components.formatting import ago

NOTICE = "environments_notice"
TARGETS = {"builtin": "Built-in (recorded by Orgdeck)", "webhook": "Webhook (a signed manifest is POSTed)"}

connection = current()
orgdeck = client()


def notify(message: str) -> None:
    """Say what happened on the next run, after the page has redrawn with the change."""
    st.session_state[NOTICE] = message
    st.rerun()


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
    with st.form(f"set_secret_{scope_key}", clear_on_submit=True):
        name_col, value_col = st.columns(2)
        name = name_col.text_input(
            "Secret name",
            placeholder="e.g. ZENDESK_TOKEN",
            help="Upper case, digits and underscores. An existing name gets the new value as its next "
            "version (rotation).",
            key=f"secret_name_{scope_key}",
        )
        value = value_col.text_input(
            "Value",
            type="password",
            help="Stored encrypted; never shown again.",
            key=f"secret_value_{scope_key}",
        )
        if st.form_submit_button("Save secret", type="primary"):
            try:
                saved = orgdeck.environments.secrets.set(name.strip(), value, environment_id=environment_id)
            except ApiError as error:
                show_error(error, "save the secret")
            else:
                # Forget the typed value now, not only in the browser: session state outlives the form.
                del st.session_state[f"secret_value_{scope_key}"]
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
            if confirmed("Delete secret", key=f"delete_secret_{doomed.id}", warning=warning):
                try:
                    orgdeck.environments.secrets.delete(doomed.id)
                except ApiError as error:
                    show_error(error, "delete the secret")
                else:
                    notify(f"Deleted **{doomed.name}** {scope}.")


def settings_panel(environment: Environment) -> None:
    with st.form(f"edit_environment_{environment.id}"):
        description = st.text_area("Description", value=environment.description, max_chars=2000)
        target = st.radio(
            "Target",
            list(TARGETS),
            format_func=TARGETS.__getitem__,
            index=list(TARGETS).index(environment.target),
            horizontal=True,
        )
        webhook_url = st.text_input(
            "Webhook URL", value=environment.webhook_url or "", help="Webhook targets only."
        )
        if st.form_submit_button("Save changes"):
            changes = {"description": description, "target": target}
            if target == "webhook":
                changes["webhook_url"] = webhook_url.strip()
            try:
                orgdeck.environments.update(environment.id, **changes)
            except ApiError as error:
                show_error(error, "save the environment")
            else:
                notify(f"Saved **{environment.name}**.")
    warning = (
        f"Delete **{environment.name}** and its {environment.secret_count} secrets? "
        "Its tool deployment records go too. This cannot be undone."
    )
    if confirmed("Delete environment", key=f"delete_environment_{environment.id}", warning=warning):
        try:
            orgdeck.environments.delete(environment.id)
        except ApiError as error:
            show_error(error, "delete the environment")
        else:
            notify(f"Deleted environment **{environment.name}**.")


st.title("Environments")
st.caption(
    "Where agents run. A built-in target records deployments here; a webhook target receives each "
    "deployment as a signed manifest. Secrets are encrypted at rest and no screen shows a value again."
)
notice = st.session_state.pop(NOTICE, None)
if notice:
    st.success(notice, icon=":material/check_circle:")

environments = load("list environments", lambda: orgdeck.environments.list(limit=MAX_PAGE_SIZE)).items
all_secrets = load("list secrets", lambda: orgdeck.environments.secrets.list(limit=MAX_PAGE_SIZE)).items
org_wide = [s for s in all_secrets if s.environment_id is None]

count_col, webhook_col, secret_col, org_col = st.columns(4)
count_col.metric("Environments", len(environments))
webhook_col.metric("Webhook targets", sum(e.target == "webhook" for e in environments))
secret_col.metric("Environment secrets", sum(e.secret_count for e in environments))
org_col.metric("Organization-wide secrets", len(org_wide))

if environments:
    overview = pd.DataFrame(
        [
            {
                "Name": e.name,
                "Target": e.target,
                "Secrets": e.secret_count,
                "Webhook URL": e.webhook_url or "",
                "Description": e.description,
                "Updated": ago(e.updated_at),
            }
            for e in environments
        ]
    )
    st.dataframe(overview, hide_index=True, width="stretch")
else:
    st.info("No environments yet. Create the first one below, for instance `staging` and then `production`.")

with (
    st.expander("New environment", expanded=not environments, icon=":material/add:"),
    st.form("create_environment", clear_on_submit=True),
):
    name = st.text_input("Name", placeholder="e.g. eu-production", help="Lowercase letters, digits, hyphens.")
    description = st.text_input("Description", max_chars=2000)
    target = st.radio("Target", list(TARGETS), format_func=TARGETS.__getitem__, horizontal=True)
    webhook_url = st.text_input("Webhook URL", placeholder="https://deploy.example.com/orgdeck")
    if st.form_submit_button("Create environment", type="primary"):
        try:
            created = orgdeck.environments.create(
                name.strip(),
                description=description,
                target=target,
                webhook_url=webhook_url.strip() if target == "webhook" else None,
            )
        except ApiError as error:
            show_error(error, "create the environment")
        else:
            st.session_state["environment_choice"] = created.name
            notify(f"Created environment **{created.name}**.")

if environments:
    st.subheader("Environment details")
    by_name = {e.name: e for e in environments}
    if st.session_state.get("environment_choice") not in by_name:
        st.session_state["environment_choice"] = environments[0].name
    chosen = by_name[st.selectbox("Environment", list(by_name), key="environment_choice")]
    secrets_col, settings_col = st.columns([3, 2], gap="large")
    with secrets_col:
        st.markdown(f"**Secrets of `{chosen.name}`**")
        own = [s for s in all_secrets if s.environment_id == chosen.id]
        secrets_panel(own, environment_id=chosen.id, scope=f"in {chosen.name}")
    with settings_col:
        st.markdown("**Settings**")
        settings_panel(chosen)

st.subheader("Organization-wide secrets")
st.caption("Available in every environment; an environment's own secret of the same name takes precedence.")
secrets_panel(org_wide, environment_id=None, scope="organization-wide")
