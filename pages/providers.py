"""Governance → LLM providers: the organization's model connections (add, test, delete) and the system models."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.providers import KINDS_NEEDING_BASE_URL, PROVIDER_KINDS, Provider, ProviderTestResult
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import explain, load, show_error
from components.formatting import ago
from components.providers import model_picker

NOTICE = "providers_notice"
TEST_RESULT = "provider_test_result"
KIND_LABELS = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "azure_openai": "Azure OpenAI",
    "openai_compatible": "OpenAI-compatible (Ollama, vLLM, LM Studio, …)",
}
BASE_URL_HINT = (
    "Required for Azure OpenAI (https://NAME.openai.azure.com) and OpenAI-compatible servers "
    "(up to and including /v1, e.g. http://127.0.0.1:11434/v1 for Ollama). "
    "OpenAI and Anthropic use their public APIs when left empty."
)

connection = current()
orgdeck = client()


def notify(message: str) -> None:
    st.session_state[NOTICE] = message
    st.rerun()


def key_label(provider: Provider) -> str:
    if not provider.api_key_set:
        return "none"
    return f"…{provider.api_key_last4}" if provider.api_key_last4 else "set"


def show_test_result(result: ProviderTestResult) -> None:
    if result.ok:
        st.success(
            f"**Connected** in {result.latency_ms} ms · model `{result.model}` answered: {result.message}",
            icon=":material/check_circle:",
        )
    else:
        st.error(f"**Test failed** ({result.code}). {result.message}", icon=":material/error:")


def add_provider_form() -> None:
    with st.form("add_provider", clear_on_submit=True):
        name_col, kind_col = st.columns(2)
        name = name_col.text_input("Name", placeholder="e.g. Team OpenAI", max_chars=200)
        kind = kind_col.selectbox("Kind", PROVIDER_KINDS, format_func=KIND_LABELS.get)
        base_url = st.text_input("Base URL", help=BASE_URL_HINT)
        api_key = st.text_input(
            "API key", type="password", help="Stored encrypted; only its last 4 characters are ever shown."
        )
        models_col, default_col = st.columns(2)
        models = models_col.text_input(
            "Models", placeholder="gpt-4o-mini, gpt-4o", help="Comma-separated; Azure: deployment names."
        )
        default_model = default_col.text_input("Default model", help="Default: the first model listed.")
        if st.form_submit_button("Add provider", type="primary"):
            if kind in KINDS_NEEDING_BASE_URL and not base_url.strip():
                st.error(f"{KIND_LABELS[kind]} needs a base URL. {BASE_URL_HINT}")
                return
            try:
                created = orgdeck.providers.create(
                    name.strip(),
                    kind,
                    base_url=base_url.strip() or None,
                    api_key=api_key or None,
                    models=[m.strip() for m in models.split(",") if m.strip()],
                    default_model=default_model.strip() or None,
                )
            except ApiError as error:
                show_error(error, "add the provider")
            else:
                st.session_state["provider_choice"] = created.id
                notify(f"Added **{created.name}**. Test the connection below.")


def provider_details(provider: Provider) -> None:
    test_col, manage_col = st.columns([3, 2], gap="large")
    with test_col:
        st.markdown(f"**Test `{provider.name}`**")
        st.caption("Makes one real, minimal call to the model, with the service's provider timeout.")
        model = model_picker(provider, key=f"test_model_{provider.id}")
        if st.button("Test connection", type="primary", icon=":material/network_check:"):
            try:
                result = orgdeck.providers.test(provider.id, model_id=model)
            except ApiError as error:
                show_error(error, "test the connection")
            else:
                st.session_state[TEST_RESULT] = (provider.id, result)
        tested = st.session_state.get(TEST_RESULT)
        if tested and tested[0] == provider.id:
            show_test_result(tested[1])
    with manage_col:
        with st.form(f"replace_key_{provider.id}", clear_on_submit=True):
            new_key = st.text_input("Replace the API key", type="password")
            if st.form_submit_button("Save key"):
                try:
                    orgdeck.providers.update(provider.id, api_key=new_key)
                except ApiError as error:
                    show_error(error, "save the key")
                else:
                    notify(f"Replaced the API key of **{provider.name}**.")
        warning = f"Delete **{provider.name}**? Drafting with it stops working. Saved policies stay."
        if confirmed("Delete provider", key=f"delete_provider_{provider.id}", warning=warning):
            try:
                orgdeck.providers.delete(provider.id)
            except ApiError as error:
                show_error(error, "delete the provider")
            else:
                st.session_state.pop("provider_choice", None)
                notify(f"Deleted **{provider.name}**.")


st.title("LLM providers")
st.caption(
    "Connections to language-model providers that policy authors can draft with. API keys are "
    "encrypted at rest and never shown again."
)
notice = st.session_state.pop(NOTICE, None)
if notice:
    st.success(notice, icon=":material/check_circle:")

providers = load("list provider connections", orgdeck.providers.list).items
if providers:
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "Name": p.name,
                    "Kind": KIND_LABELS[p.kind],
                    "Base URL": p.base_url,
                    "Models": ", ".join(p.models),
                    "Default model": p.default_model or "",
                    "API key": key_label(p),
                    "Updated": ago(p.updated_at),
                }
                for p in providers
            ]
        ),
        hide_index=True,
        use_container_width=True,
    )
else:
    st.info("No provider connections yet. Add one below; drafting also works with the built-in drafter.")

with st.expander("Add a provider", expanded=not providers, icon=":material/add:"):
    add_provider_form()

if providers:
    by_id = {p.id: p for p in providers}
    if st.session_state.get("provider_choice") not in by_id:
        st.session_state["provider_choice"] = providers[0].id
    chosen = st.selectbox("Provider", list(by_id), format_func=lambda i: by_id[i].name, key="provider_choice")
    provider_details(by_id[chosen])

st.subheader("System models")
st.caption(
    "Offered to every organization by the operator (ORGDECK_SYSTEM_MODELS); the built-in drafter needs no network."
)
try:
    system_models = orgdeck.providers.system_models().items
except ApiError as error:
    st.error(explain(error))
else:
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "Key": m.key,
                    "Kind": m.kind,
                    "Model": m.model,
                    "Available": "yes" if m.available else "no",
                    "Default": "yes" if m.default else "",
                    "About": m.description,
                }
                for m in system_models
            ]
        ),
        hide_index=True,
        use_container_width=True,
    )
