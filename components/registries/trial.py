"""The Try tab: a version's `{{variables}}` filled in, the text it renders to, and its run on a model
of the organization (one of its provider connections, or a system model), beside another version
run on the same values. Nothing is saved; each run is on record in the audit trail."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from api.errors import ApiError
from api.providers import Provider, SystemModel
from api.registries import ArtifactVersion, PromptRun, Registry, RetrievedArtifact, content_text, rendered
from components import layout
from components.connection import client
from components.feedback import explain, load, plain
from components.permissions import control
from components.providers import model_picker
from components.registries.content import default_version, highlighted
from components.registries.versions import labelled

NO_COMPARISON = ""
SOURCES = {"custom": "One of our providers", "system": "System model"}


@dataclass(frozen=True)
class ModelChoice:
    """What a run names as its model: a connection and one of its models, or a system model."""

    provider_id: str | None = None
    model_id: str | None = None
    system_model_key: str | None = None


def try_prompt(registry: Registry, name: str, versions: list[ArtifactVersion]) -> None:
    key = f"{registry.registry_ref}:{name}"
    chosen = _chosen_versions(key, versions)
    shown = [
        load(
            "fetch a version",
            lambda v=v: client().registries.retrieve(registry.registry_ref, name, version=v),
        )
        for v in chosen
    ]
    # Only what was filled in: a variable left empty stays marked in the text, and a run says it lacks it.
    values = {name: value for name, value in _variable_inputs(key, shown).items() if value}
    model = _model_choice(key)
    runs_key = f"try_runs:{key}"
    if st.button(
        "Run" if len(shown) == 1 else "Run both",
        type="primary",
        icon=":material/play_arrow:",
        key=f"try_run:{key}",
        **control("tryPrompt", disabled=model is None, help=None if model else "Choose a model to run on."),
    ):
        assert model is not None
        st.session_state[runs_key] = {
            version.version: _run(registry, name, version.version, values, model) for version in shown
        }
    runs: dict[str, PromptRun | str] = st.session_state.get(runs_key, {})
    for column, version in zip(layout.compared(f"try_{key}", len(shown)), shown, strict=True):
        with column:
            _version_pane(version, values, runs.get(version.version))


def _chosen_versions(key: str, versions: list[ArtifactVersion]) -> list[str]:
    options, shown_as = [v.version for v in versions], labelled(versions)
    version_col, other_col = layout.fields(f"try_versions_{key}", 2)
    version = version_col.selectbox(
        "Version", options, index=default_version(versions), format_func=shown_as, key=f"try_version:{key}"
    )
    others = [NO_COMPARISON, *(option for option in options if option != version)]
    other = other_col.selectbox(
        "Compare with",
        others,
        format_func=lambda v: shown_as(v) if v else "No other version",
        key=f"try_other:{key}",
        help="Another version rendered and run on the same values, side by side.",
    )
    return [version, other] if other else [version]


def _variable_inputs(key: str, shown: list[RetrievedArtifact]) -> dict[str, str]:
    """One input for each variable of the versions shown, in order of first appearance."""
    names = list(dict.fromkeys(name for version in shown for name in version.variables))
    if not names:
        st.caption("No `{{variables}}` in this version.")
        return {}
    st.markdown("**Variables**")
    return {name: st.text_input(name, key=f"try_variable:{key}:{name}") for name in names}


def _model_choice(key: str) -> ModelChoice | None:
    """The model chosen to run on, None when there is none to choose."""
    source = st.radio(
        "Run on", list(SOURCES), format_func=SOURCES.get, horizontal=True, key=f"try_source:{key}"
    )
    if source == "system":
        models = _system_models()
        if not models:
            st.info("The operator has configured no system model: run on one of your providers.")
            return None
        model = st.selectbox("System model", models, format_func=_model_label, key=f"try_system_model:{key}")
        return ModelChoice(system_model_key=model.key)
    providers = load("list provider connections", client().providers.list).items
    if not providers:
        st.info("No provider connections yet: add one on the Providers page.", icon=":material/info:")
        return None
    provider_col, model_col = layout.fields(f"try_model_{key}", 2)
    provider: Provider = provider_col.selectbox(
        "Provider", providers, format_func=lambda p: f"{p.name} ({p.kind})", key=f"try_provider:{key}"
    )
    model_id = model_picker(provider, key=f"try_model:{key}:{provider.id}", where=model_col)
    return ModelChoice(provider_id=provider.id, model_id=model_id)


def _system_models() -> list[SystemModel]:
    # The built-in drafter writes policies from instructions; it cannot answer a prompt.
    listed = load("list the system models", client().providers.system_models).items
    return [model for model in listed if not model.builtin]


def _model_label(model: SystemModel) -> str:
    return f"{model.key}: {model.model} ({model.kind})" + ("" if model.available else " (unavailable)")


def _run(
    registry: Registry, name: str, version: str, values: dict[str, str], model: ModelChoice
) -> PromptRun | str:
    """The run, or what went wrong in words (a provider's failure is shown beside its version)."""
    try:
        return client().registries.try_prompt(
            registry.registry_ref,
            name,
            version,
            variables=values,
            provider_id=model.provider_id,
            model_id=model.model_id,
            system_model_key=model.system_model_key,
        )
    except ApiError as error:
        return explain(error)


def _version_pane(version: RetrievedArtifact, values: dict[str, str], run: PromptRun | str | None) -> None:
    st.markdown(f"**Version {version.version}**")
    text = content_text(rendered(version.content, values))
    with st.container(border=True):
        st.markdown(highlighted(text), unsafe_allow_html=True)
    if isinstance(run, str):
        st.error(f"**Could not run version {version.version}.** {plain(run)}", icon=":material/error:")
    elif run is not None:
        st.markdown("**Answer**")
        with st.container(border=True):
            st.text(run.answer)
        st.caption(_figures(run))
        if run.rendered != text:
            st.caption(":material/history: Answered on earlier values: run again to answer these.")


def _figures(run: PromptRun) -> str:
    tokens = (
        f"{run.input_tokens if run.input_tokens is not None else '?'} in · "
        f"{run.output_tokens if run.output_tokens is not None else '?'} out · "
        f"{run.total_tokens} tokens"
        if run.total_tokens is not None
        else "tokens not reported"
    )
    return f"{run.model} · {tokens} · {run.latency_ms} ms"
