"""Choosing a model of a provider connection, the same way on every page."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from api.providers import Provider


def model_picker(provider: Provider, *, key: str, where: DeltaGenerator | None = None) -> str | None:
    """A model of the connection, its default first chosen; a model not listed can be typed in."""
    models = provider.models
    if provider.default_model in models:
        index: int | None = models.index(provider.default_model)
    else:
        index = 0 if models else None
    return (where or st).selectbox("Model", models, index=index, key=key, accept_new_options=True)
