"""Governance → LLM providers: the organization's model connections (add, test, delete) and the system models."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.providers import KINDS_NEEDING_BASE_URL, PROVIDER_KINDS, Provider, ProviderTestResult
from components import layout
from components.confirm import confirmed
from components.connection import client, current
from components.feedback import attempt, load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields, InvalidField
from components.permissions import control
from components.providers import model_picker
from components.tables import chosen_row, open_linked, select

TEST_RESULT = "provider_test_result"
TABLE = "providers_table"
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
    with st.form("add_provider"):
        fields = FormFields("provider")
        name_col, kind_col = layout.fields("new_provider_names", 2)
        name = fields.text_input("name", key="new_provider_name", where=name_col)
        kind = kind_col.selectbox(
            "Kind", PROVIDER_KINDS, format_func=KIND_LABELS.get, key="new_provider_kind"
        )
        base_url = fields.text_input("baseUrl", key="new_provider_base_url", help=BASE_URL_HINT)
        api_key = fields.text_input("apiKey", key="new_provider_api_key", type="password")
        models_col, default_col = layout.fields("new_provider_models", 2)
        models = fields.text_input("models", key="new_provider_models", where=models_col)
        default_model = fields.text_input(
            "defaultModel",
            key="new_provider_default_model",
            where=default_col,
            help="Default: the first model listed.",
        )
        if st.form_submit_button("Add provider", type="primary", **control("createProvider")):
            try:
                if kind in KINDS_NEEDING_BASE_URL and not base_url.strip():
                    raise InvalidField("baseUrl", f"{KIND_LABELS[kind]} needs one. {BASE_URL_HINT}")
                created = orgdeck.providers.create(
                    name.strip(),
                    kind,
                    base_url=base_url.strip() or None,
                    api_key=api_key or None,
                    models=[m.strip() for m in models.split(",") if m.strip()],
                    default_model=default_model.strip() or None,
                )
            except (InvalidField, ApiError) as error:
                fields.show(error, "add the provider")
            else:
                fields.clear()
                select(TABLE, created.id)
                notify(f"Added **{plain(created.name)}**. Test the connection below.")


def provider_details(provider: Provider) -> None:
    test_col, manage_col = layout.panes("provider", 2)
    with test_col:
        st.markdown(f"**Test `{provider.name}`**")
        st.caption("Makes one real, minimal call to the model, with the service's provider timeout.")
        model = model_picker(provider, key=f"test_model_{provider.id}")
        if st.button(
            "Test connection", type="primary", icon=":material/network_check:", **control("testProvider")
        ):
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
        with st.form(f"replace_key_{provider.id}"):
            fields = FormFields("provider")
            new_key = fields.text_input(
                "apiKey", key=f"replace_key_{provider.id}", label="Replace the API key", type="password"
            )
            if st.form_submit_button("Save key", **control("updateProvider")):
                try:
                    orgdeck.providers.update(provider.id, api_key=new_key)
                except ApiError as error:
                    fields.show(error, "save the key")
                else:
                    fields.clear()
                    notify(f"Replaced the API key of **{plain(provider.name)}**.")
        warning = f"Delete **{plain(provider.name)}**? Drafting with it stops working. Saved policies stay."
        if confirmed(
            "Delete provider",
            key=f"delete_provider_{provider.id}",
            warning=warning,
            **control("deleteProvider"),
        ):
            try:
                orgdeck.providers.delete(provider.id)
            except ApiError as error:
                show_error(error, "delete the provider")
            else:
                notify(f"Deleted **{plain(provider.name)}**.")


st.title("LLM providers")
st.caption(
    "Connections to language-model providers that policy authors can draft with. API keys are "
    "encrypted at rest and never shown again."
)
show_notice()

providers = load("list provider connections", orgdeck.providers.list).items
chosen_id = None
if providers:
    table = pd.DataFrame(
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
    )
    open_linked(TABLE)
    chosen_id = chosen_row(table, [p.id for p in providers], key=TABLE, width="stretch")
else:
    st.info("No provider connections yet. Add one below; drafting also works with the built-in drafter.")

with st.expander("Add a provider", expanded=not providers, icon=":material/add:"):
    add_provider_form()

if chosen_id is not None:
    provider_details(next(p for p in providers if p.id == chosen_id))

st.subheader("System models")
st.caption(
    "Offered to every organization by the operator (ORGDECK_SYSTEM_MODELS); the built-in drafter needs no network."
)
system_models = attempt("list the system models", orgdeck.providers.system_models)
if system_models is not None:
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
                for m in system_models.items
            ]
        ),
        hide_index=True,
        width="stretch",
    )
