"""Governance → Policies: draft a rule from instructions with a model, edit it, save it; browse policies."""

from __future__ import annotations

import difflib

import pandas as pd
import streamlit as st

from api import ApiError
from api.common import MAX_PAGE_SIZE
from api.governance import BUILTIN_DRAFTER_KEY, CATEGORIES, SEVERITIES, PolicyDraft, PolicyWithVersions
from api.providers import Provider, SystemModel
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import explain, load, show_error
from components.formatting import ago
from components.providers import model_picker

NOTICE = "governance_notice"
DRAFT = "governance_draft"
DRAFT_ERROR = "governance_draft_error"
SOURCES = {"system": "System model", "custom": "One of our providers"}
SEVERITY_LABELS = {"error": "error (blocks)", "warning": "warning (reports)"}
ALL = "All"

connection = current()
orgdeck = client()


def notify(message: str) -> None:
    st.session_state[NOTICE] = message
    st.rerun()


def model_label(model: SystemModel) -> str:
    if model.builtin:
        return "Built-in template drafter (offline)"
    return f"{model.key}: {model.model} ({model.kind})" + ("" if model.available else " (unavailable)")


def generate_draft() -> None:
    """Button callback: ask the service for a draft and put it in the editable fields."""
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
        state[DRAFT_ERROR] = explain(error)
        return
    state.pop(DRAFT_ERROR, None)
    state[DRAFT] = draft
    state["draft_text"] = draft.rule_text
    state["draft_title"] = draft.name


def save_draft(draft: PolicyDraft) -> None:
    state = st.session_state
    try:
        saved = orgdeck.policies.create(
            state["draft_title"].strip(),
            state["draft_text"],
            description=draft.description,
            category=draft.category,
            severity=draft.severity,
            drafted_with=f"{draft.drafted_with.name} / {draft.drafted_with.model}"[:200],
        )
    except ApiError as error:
        show_error(error, "save the policy")
        return
    state.pop(DRAFT)
    state["policy_choice"] = saved.id
    notify(f"Saved policy **{saved.name}** as version 1.")


def drafting_form(system_models: list[SystemModel], providers: list[Provider]) -> None:
    st.text_area(
        "Instructions",
        key="draft_instructions",
        height=140,
        placeholder="e.g. Never log customer PII. Always use TLS for outbound calls. No secrets in prompts.",
        help="Plain sentences; each becomes a numbered MUST or MUST NOT statement.",
    )
    name_col, category_col, severity_col = st.columns([4, 3, 3])
    name_col.text_input("Name (optional)", key="draft_name_input", max_chars=200)
    category_col.selectbox("Category", CATEGORIES, key="draft_category")
    severity_col.selectbox("Severity", SEVERITIES, key="draft_severity", format_func=SEVERITY_LABELS.get)
    st.text_input("Description (optional)", key="draft_description", max_chars=2000)
    source = st.radio(
        "Draft with", list(SOURCES), format_func=SOURCES.get, horizontal=True, key="draft_source"
    )
    if source == "system":
        st.selectbox("System model", system_models, format_func=model_label, key="draft_system_model")
    elif providers:
        provider_col, model_col = st.columns(2)
        provider = provider_col.selectbox(
            "Provider", providers, format_func=lambda p: f"{p.name} ({p.kind})", key="draft_provider"
        )
        model_picker(provider, key="draft_model", where=model_col)
    else:
        st.info("No provider connections yet: add one on the Providers page, or draft with a system model.")
    st.button(
        "Generate draft",
        type="primary",
        icon=":material/edit_note:",
        on_click=generate_draft,
        disabled=source == "custom" and not providers,
    )


def draft_editor() -> None:
    error = st.session_state.get(DRAFT_ERROR)
    if error:
        st.error(f"**Could not draft the policy.** {error}", icon=":material/error:")
    draft: PolicyDraft | None = st.session_state.get(DRAFT)
    if draft is None:
        st.info("The draft appears here, ready to edit. The built-in drafter works offline.")
        return
    used = draft.drafted_with
    if draft.notice:  # the built-in drafter: no model, no time worth telling
        st.caption(draft.notice)
    else:
        tokens = f" · {draft.usage.total_tokens} tokens" if draft.usage and draft.usage.total_tokens else ""
        st.caption(f"Drafted by **{used.name}** · model `{used.model}` · {draft.latency_ms} ms{tokens}")
    st.text_input("Policy name", key="draft_title", max_chars=200)
    st.text_area("Draft rule text", key="draft_text", height=320)
    st.caption(f"Category **{draft.category}** · severity **{draft.severity}**")
    if st.button("Save as policy", type="primary", icon=":material/save:"):
        save_draft(draft)


def policy_details(policy: PolicyWithVersions) -> None:
    st.markdown(f"**{policy.name}** · {policy.category} · {policy.severity} · version {policy.version}")
    if policy.description:
        st.caption(policy.description)
    text_col, versions_col = st.columns([3, 2], gap="large")
    with text_col, st.form(f"edit_policy_{policy.id}_{policy.version}"):
        text = st.text_area("Rule text", value=policy.rule_text, height=260)
        if st.form_submit_button("Save as new version"):
            try:
                updated = orgdeck.policies.update(policy.id, rule_text=text)
            except ApiError as error:
                show_error(error, "save the policy")
            else:
                notify(f"Saved **{updated.name}**, now at version {updated.version}.")
    with versions_col:
        st.markdown("**Versions**")
        st.dataframe(
            pd.DataFrame(
                [
                    {"Version": v.version, "Severity": v.severity, "Name": v.name, "Saved": ago(v.created_at)}
                    for v in policy.versions
                ]
            ),
            hide_index=True,
            use_container_width=True,
        )
        earlier = policy.versions[1:]
        if earlier:
            shown = st.selectbox(
                "Compare with", earlier, format_func=lambda v: f"version {v.version}", key=f"cmp_{policy.id}"
            )
            diff = difflib.unified_diff(
                shown.rule_text.splitlines(),
                policy.rule_text.splitlines(),
                f"version {shown.version}",
                f"version {policy.version}",
                lineterm="",
            )
            st.code("\n".join(diff) or "Same rule text.", language="diff")
    warning = f"Delete **{policy.name}** and all {len(policy.versions)} versions? This cannot be undone."
    if confirmed("Delete policy", key=f"delete_policy_{policy.id}", warning=warning):
        try:
            orgdeck.policies.delete(policy.id)
        except ApiError as error:
            show_error(error, "delete the policy")
        else:
            st.session_state.pop("policy_choice", None)
            notify(f"Deleted policy **{policy.name}**.")


st.title("Governance policies")
st.caption(
    "Draft a rule for the organization's agents from plain instructions, with the built-in drafter, a "
    "model the operator offers or one of your own providers; edit it, then save it as a policy."
)
notice = st.session_state.pop(NOTICE, None)
if notice:
    st.success(notice, icon=":material/check_circle:")

system_models = load("list the system models", orgdeck.providers.system_models).items
providers = load("list provider connections", orgdeck.providers.list).items
if st.session_state.get("draft_system_model") not in system_models:
    st.session_state["draft_system_model"] = next(m for m in system_models if m.key == BUILTIN_DRAFTER_KEY)

form_col, draft_col = st.columns(2, gap="large")
with form_col:
    st.subheader("Draft a policy")
    drafting_form(system_models, providers)
with draft_col:
    st.subheader("Draft")
    draft_editor()

st.subheader("Policies")
filter_col, severity_filter_col, _ = st.columns([1, 1, 2])
category = filter_col.selectbox("Category", [ALL, *CATEGORIES], key="filter_category")
severity = severity_filter_col.selectbox("Severity", [ALL, *SEVERITIES], key="filter_severity")
page = load(
    "list policies",
    lambda: orgdeck.policies.list(
        category=None if category == ALL else category,
        severity=None if severity == ALL else severity,
        limit=MAX_PAGE_SIZE,
    ),
)
if not page.items:
    filtered = category != ALL or severity != ALL
    st.info("No policies match these filters." if filtered else "No policies yet: draft the first one above.")
    st.stop()
st.dataframe(
    pd.DataFrame(
        [
            {
                "Name": p.name,
                "Category": p.category,
                "Severity": p.severity,
                "Version": p.version,
                "Drafted with": p.drafted_with or "",
                "Updated": ago(p.updated_at),
            }
            for p in page.items
        ]
    ),
    hide_index=True,
    use_container_width=True,
)
if page.total and page.total > len(page.items):
    st.caption(f"Showing the newest {len(page.items)} of {page.total}.")
by_id = {p.id: p for p in page.items}
if st.session_state.get("policy_choice") not in by_id:
    st.session_state["policy_choice"] = page.items[0].id
chosen = st.selectbox("Policy", list(by_id), format_func=lambda i: by_id[i].name, key="policy_choice")
policy_details(load("load the policy", lambda: orgdeck.policies.get(chosen)))
