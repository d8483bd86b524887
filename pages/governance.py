"""Governance: what runs now against every policy (compliance), drafting a rule with its check from
instructions, the policies with their check, scope, examples and enforcement, and exceptions."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from pydantic.alias_generators import to_camel

from api import ApiError
from api.common import MAX_PAGE_SIZE
from api.governance import (
    BUILTIN_DRAFTER_KEY,
    CATEGORIES,
    SEVERITIES,
    Policy,
    PolicyDraft,
    PolicyWithVersions,
)
from api.providers import Provider, SystemModel
from components import layout
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.governance import editor
from components.governance.compliance import compliance_view
from components.governance.exceptions import exceptions_section
from components.governance.versions import versions_panel
from components.permissions import control
from components.providers import model_picker
from components.tables import chosen_row, open_linked, select

DRAFT = "governance_draft"
TABLE = "policies_table"
SOURCES = {"system": "System model", "custom": "One of our providers"}
SEVERITY_LABELS = {"error": "error (blocks)", "warning": "warning (reports)"}
ALL = "All"
BOUND = "query-params"
# The draft's editable fields, filled from each new draft.
DRAFT_FIELDS = {
    "draft_title": "name",
    "draft_text": "rule_text",
    "draft_edit_category": "category",
    "draft_edit_severity": "severity",
    "draft_edit_description": "description",
}

connection = current()
orgdeck = client()
# Where the organization requires it, saving a policy submits it for another member's approval.
REVIEWED = load("read the organization's settings", orgdeck.settings.get).policy_approval_required


def model_label(model: SystemModel) -> str:
    if model.builtin:
        return "Built-in template drafter (offline)"
    return f"{model.key}: {model.model} ({model.kind})" + ("" if model.available else " (unavailable)")


def generate_draft(fields: FormFields) -> None:
    """Ask the service for a draft and put it in the draft's fields, or say why not next to the field."""
    state = st.session_state
    source = state["draft_source"]
    provider: Provider | None = state.get("draft_provider") if source == "custom" else None
    try:
        draft = orgdeck.policies.generate(
            state["draft_instructions"],
            name=state["draft_name_input"].strip(),
            description=state["draft_description"],
            category=state["draft_category"],
            severity=state["draft_severity"],
            provider_source=source,
            system_model_key=state["draft_system_model"].key if source == "system" else None,
            provider_id=provider.id if provider else None,
            model_id=state.get("draft_model") if provider else None,
        )
    except ApiError as error:
        fields.show(error, "draft the policy")
        return
    state[DRAFT] = draft
    # The draft's column is drawn after this one: its fields take the new draft's values.
    for key, field in DRAFT_FIELDS.items():
        state[key] = getattr(draft, field)
    editor.seed("draft", draft, overwrite=True)


def drafting_form(system_models: list[SystemModel], providers: list[Provider]) -> None:
    fields = FormFields("draft")
    fields.text_area(
        "instructions",
        key="draft_instructions",
        height=140,
        placeholder="e.g. Never log customer PII. Always use TLS for outbound calls. No secrets in prompts.",
        help="Plain sentences; each becomes a numbered MUST or MUST NOT statement.",
    )
    fields.text_input("name", key="draft_name_input", label="Name (optional)")
    category_col, severity_col = layout.fields("draft_classes", 2)
    category_col.selectbox("Category", CATEGORIES, key="draft_category")
    severity_col.selectbox("Severity", SEVERITIES, key="draft_severity", format_func=SEVERITY_LABELS.get)
    fields.text_input("description", key="draft_description", label="Description (optional)")
    source = st.radio(
        "Draft with", list(SOURCES), format_func=SOURCES.get, horizontal=True, key="draft_source"
    )
    if source == "system":
        st.selectbox("System model", system_models, format_func=model_label, key="draft_system_model")
        fields.slot("systemModelKey")
    elif providers:
        provider_col, model_col = layout.fields("draft_model", 2)
        provider = provider_col.selectbox(
            "Provider", providers, format_func=lambda p: f"{p.name} ({p.kind})", key="draft_provider"
        )
        fields.slot("providerId", where=provider_col)
        model_picker(provider, key="draft_model", where=model_col)
        fields.slot("modelId", where=model_col)
    else:
        st.info("No provider connections yet: add one on the Providers page, or draft with a system model.")
    if st.button(
        "Generate draft",
        type="primary",
        icon=":material/edit_note:",
        **control("generatePolicyPrompt", disabled=source == "custom" and not providers),
    ):
        generate_draft(fields)


def policy_fields(fields: FormFields, *, key: str, name_key: str) -> None:
    """Name, category, severity and description: what a draft and a saved policy both edit."""
    fields.text_input("name", key=name_key)
    category_col, severity_col = layout.fields(f"{key}_edit_classes", 2)
    category_col.selectbox("Category", CATEGORIES, key=f"{key}_edit_category")
    severity_col.selectbox(
        "Severity", SEVERITIES, key=f"{key}_edit_severity", format_func=SEVERITY_LABELS.get
    )
    fields.text_input("description", key=f"{key}_edit_description")


def submit_for_approval(payload: dict[str, Any], reason: str, fields: FormFields, what: str) -> bool:
    """Open a policy change request; True once it is open."""
    try:
        opened = orgdeck.change_requests.open("policy", payload, reason.strip() or what)
    except ApiError as error:
        fields.show(error, "submit the policy for approval")
        return False
    notify(
        f"Submitted {plain(what)} for approval ({opened.id}): it takes effect once another member "
        "approves it on the Changes page."
    )
    return True


def reason_input(key: str) -> str:
    return st.text_input("Reason (for the reviewers)", key=key) if REVIEWED else ""


def save_draft(draft: PolicyDraft, fields: FormFields, reason: str, typed: editor.CheckValues) -> None:
    state = st.session_state
    if REVIEWED:
        payload = {
            "name": state["draft_title"].strip(),
            "ruleText": state["draft_text"],
            "description": state["draft_edit_description"],
            "category": state["draft_edit_category"],
            "severity": state["draft_edit_severity"],
            "draftedWith": f"{draft.drafted_with.name} / {draft.drafted_with.model}"[:200],
        } | {to_camel(field): value for field, value in typed.changes().items() if value is not None}
        if submit_for_approval(payload, reason, fields, f"new policy {payload['name']}"):
            state.pop(DRAFT)
        return
    try:
        saved = orgdeck.policies.create(
            state["draft_title"].strip(),
            state["draft_text"],
            description=state["draft_edit_description"],
            category=state["draft_edit_category"],
            severity=state["draft_edit_severity"],
            drafted_with=f"{draft.drafted_with.name} / {draft.drafted_with.model}"[:200],
            **typed.changes(),
        )
    except ApiError as error:
        fields.show(error, "save the policy")
        return
    state.pop(DRAFT)
    select(TABLE, saved.id)
    notify(f"Saved policy **{plain(saved.name)}** as version 1.")


def draft_editor(fields: FormFields) -> None:
    draft: PolicyDraft | None = st.session_state.get(DRAFT)
    if draft is None:
        st.info("The draft appears here, ready to edit. The built-in drafter works offline.")
        return
    used = draft.drafted_with
    if not draft.builtin:  # the built-in drafter: no model, no time worth telling
        tokens = f" · {draft.usage.total_tokens} tokens" if draft.usage and draft.usage.total_tokens else ""
        st.caption(
            f"Drafted by **{plain(used.name)}** · model `{used.model}` · {draft.latency_ms} ms{tokens}"
        )
    if draft.notice:
        st.caption(plain(draft.notice))
    policy_fields(fields, key="draft", name_key="draft_title")
    fields.text_area("ruleText", key="draft_text", label="Draft rule text", height=220)
    editor.check_pane("draft", fields)


def draft_check(fields: FormFields) -> None:
    """The draft's scope, examples and enforcement, under the drafting columns, and its Save."""
    draft: PolicyDraft | None = st.session_state.get(DRAFT)
    if draft is None:
        return
    typed = editor.check_editor("draft", fields, environment_names, fleet_names)
    reason = reason_input("draft_reason")
    if st.button(
        "Submit for approval" if REVIEWED else "Save as policy",
        type="primary",
        icon=":material/save:",
        **control("openChangeRequest" if REVIEWED else "createPolicy", disabled=bool(typed.problems)),
    ):
        save_draft(draft, fields, reason, typed)


def edit_form(policy: PolicyWithVersions) -> None:
    """Every field of a saved policy; what changed becomes the next version."""
    key = f"policy_{policy.id}_{policy.version}"  # a new version starts the form from what was saved
    for field, value in (
        ("name", policy.name),
        ("edit_category", policy.category),
        ("edit_severity", policy.severity),
        ("edit_description", policy.description),
        ("text", policy.rule_text),
    ):
        st.session_state.setdefault(f"{key}_{field}", value)
    editor.seed(key, policy)
    fields = FormFields("policy")
    policy_fields(fields, key=key, name_key=f"{key}_name")
    text_col, check_col = layout.panes(f"{key}_rule", 2)
    with text_col:
        fields.text_area("ruleText", key=f"{key}_text", label="Rule text", height=220)
    with check_col:
        editor.check_pane(key, fields)
    checked = editor.check_editor(key, fields, environment_names, fleet_names)
    reason = reason_input(f"{key}_reason")
    if not st.button(
        "Submit for approval" if REVIEWED else "Save as new version",
        type="primary",
        key=f"{key}_save",
        **control("openChangeRequest" if REVIEWED else "updatePolicy", disabled=bool(checked.problems)),
    ):
        return
    state = st.session_state
    typed = {
        "name": state[f"{key}_name"].strip(),
        "category": state[f"{key}_edit_category"],
        "severity": state[f"{key}_edit_severity"],
        "description": state[f"{key}_edit_description"],
        "rule_text": state[f"{key}_text"],
    } | checked.changes()
    changes = {field: value for field, value in typed.items() if value != editor.saved_value(policy, field)}
    if not changes:
        st.info("Nothing changed: no new version was made.")
        return
    if REVIEWED:
        payload = {"policyId": policy.id} | {to_camel(field): value for field, value in changes.items()}
        submit_for_approval(payload, reason, fields, f"changes to {policy.name}")
        return
    try:
        updated = orgdeck.policies.update(policy.id, **changes)
    except ApiError as error:
        fields.show(error, "save the policy")
    else:
        notify(f"Saved **{plain(updated.name)}**, now at version {updated.version}.")


def policy_details(policy: PolicyWithVersions) -> None:
    st.subheader(policy.name, divider="gray")
    st.caption(
        f"{policy.category} · {SEVERITY_LABELS[policy.severity]} · version {policy.version} · "
        f"enforced by {policy.enforcement} · updated {ago(policy.updated_at)}"
        + (f" · drafted with {plain(policy.drafted_with)}" if policy.drafted_with else "")
    )
    edit_form(policy)
    versions_panel(policy)
    warning = (
        f"Delete **{plain(policy.name)}** and all {len(policy.versions)} versions? This cannot be undone."
    )
    if confirmed(
        "Delete policy",
        key=f"delete_policy_{policy.id}",
        warning=warning,
        **control("openChangeRequest" if REVIEWED else "deletePolicy"),
    ):
        if REVIEWED:
            payload = {"policyId": policy.id, "delete": True}
            submit_for_approval(payload, "", FormFields("policy"), f"deleting {policy.name}")
            return
        try:
            orgdeck.policies.delete(policy.id)
        except ApiError as error:
            show_error(error, "delete the policy")
        else:
            notify(f"Deleted policy **{plain(policy.name)}**.")


def policies_section() -> list[Policy]:
    st.header("Policies")
    search_col, category_col, severity_col = layout.fields("policy_filters", 3)
    search = search_col.text_input(
        "Find by name", placeholder="Part of a name, any case", key="search", bind=BOUND, max_chars=200
    )
    category = category_col.selectbox("Category", [ALL, *CATEGORIES], key="category", bind=BOUND)
    severity = severity_col.selectbox("Severity", [ALL, *SEVERITIES], key="severity", bind=BOUND)
    page = load(
        "list policies",
        lambda: orgdeck.policies.list(
            search=search.strip() or None,
            category=None if category == ALL else category,
            severity=None if severity == ALL else severity,
            limit=MAX_PAGE_SIZE,
        ),
    )
    if not page.items:
        filtered = search.strip() or category != ALL or severity != ALL
        st.info(
            "No policy matches these filters." if filtered else "No policies yet: draft the first one above."
        )
        return page.items
    table = pd.DataFrame(
        [
            {
                "Name": p.name,
                "Category": p.category,
                "Severity": p.severity,
                "Enforcement": p.enforcement,
                "Check": "yes" if p.check else "",
                "Version": p.version,
                "Drafted with": p.drafted_with or "",
                "Updated": ago(p.updated_at),
            }
            for p in page.items
        ]
    )
    open_linked(TABLE)
    chosen = chosen_row(table, [p.id for p in page.items], key=TABLE, width="stretch")
    if page.total and page.total > len(page.items):
        st.caption(f"Showing the newest {len(page.items)} of {page.total}.")
    policy_details(load("load the policy", lambda: orgdeck.policies.get(chosen)))
    return page.items


st.title("Governance policies")
st.caption(
    "Draft a rule for the organization's agents from plain instructions, with the built-in drafter, a "
    "model the operator offers or one of your own providers; give it a check with examples, try it on "
    "what runs now, then save it as a policy and choose how it is enforced."
)
show_notice()
environment_names = [e.name for e in load("list environments", orgdeck.environments.list).items]
fleet_names = {
    f.id: f.name for f in load("list fleets", lambda: orgdeck.fleets.list(limit=MAX_PAGE_SIZE)).items
}
compliance_view()

system_models = load("list the system models", orgdeck.providers.system_models).items
providers = load("list provider connections", orgdeck.providers.list).items
if st.session_state.get("draft_system_model") not in system_models:
    st.session_state["draft_system_model"] = next(m for m in system_models if m.key == BUILTIN_DRAFTER_KEY)

st.header("Draft a policy")
draft_fields = FormFields("policy")
form_col, draft_col = layout.panes("drafting", 2)
with form_col:
    drafting_form(system_models, providers)
with draft_col:
    st.subheader("Draft")
    draft_editor(draft_fields)
draft_check(draft_fields)

policies = policies_section()
agent_keys = [
    a.stable_key for a in load("list agents", lambda: orgdeck.agents.list(limit=MAX_PAGE_SIZE)).items
]
exceptions_section(policies, environment_names, agent_keys, reviewed=REVIEWED)
