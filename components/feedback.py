"""Turning API errors into messages a person can act on, never tracebacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from api.errors import ApiError, ConnectionFailed, Forbidden, RateLimited, Unauthorized

T = TypeVar("T")

_HINTS: list[tuple[type[ApiError], str]] = [
    (ConnectionFailed, "Is the service running? Check the URL in the sidebar."),
    (Unauthorized, "The API key was refused: it may have been revoked. Use another key in the sidebar."),
    (Forbidden, "This key belongs to another organization."),
    (RateLimited, "Too many requests for now; wait a moment and reload."),
]


def explain(error: ApiError) -> str:
    hint = next((text for kind, text in _HINTS if isinstance(error, kind)), "")
    return f"{error.message} {hint}".strip()


def show_error(error: ApiError, action: str) -> None:
    st.error(f"**Could not {action}.** {explain(error)}", icon=":material/error:")


def load(action: str, call: Callable[[], T]) -> T:
    """Run an API call for the page; on failure show why and stop drawing the page."""
    try:
        return call()
    except ApiError as error:
        show_error(error, action)
        st.stop()
        raise  # st.stop() raises; this keeps type checkers honest


_NOTICE_KEY = "orgdeck_notice"


def notify(message: str) -> None:
    """Rerun the page and say what happened once it has redrawn with the change."""
    st.session_state[_NOTICE_KEY] = message
    st.rerun()


def show_notice() -> None:
    """The message left by `notify` on the previous run, shown once."""
    message = st.session_state.pop(_NOTICE_KEY, None)
    if message:
        st.success(message, icon=":material/check_circle:")
