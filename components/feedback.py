"""How the console says what went wrong and what was done: in words, never as a traceback.

Every message that quotes the service or the person goes through `plain`, so that a `$` in a
field rule or a `*` in a name is shown as typed instead of being read as Markdown (two `$` signs
made LaTeX of a message).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from api.errors import ApiError, ConnectionFailed, Forbidden, RateLimited, Unauthorized
from components.fields import worded

T = TypeVar("T")

_HINTS: list[tuple[type[ApiError], str]] = [
    (ConnectionFailed, "Is the service running? Check the URL in the sidebar."),
    (Unauthorized, "The API key was refused: it may have been revoked. Use another key in the sidebar."),
    (Forbidden, "This key belongs to another organization."),
    (RateLimited, "Too many requests for now; wait a moment and reload."),
]
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|$~])")
_NOTICE_KEY = "orgdeck_notice"


def plain(text: str) -> str:
    """Text shown exactly as written where Streamlit renders Markdown (and LaTeX between `$`)."""
    return _MARKDOWN.sub(r"\\\1", text)


def explain(error: ApiError, form: str = "") -> str:
    """What went wrong and what to do about it, as plain text: the fields at fault in the words of
    their rules (of `form`, see `components.fields`), else the service's message."""
    if error.details:
        return "; ".join(worded(form, detail) for detail in error.details)
    hint = next((text for kind, text in _HINTS if isinstance(error, kind)), "")
    return f"{error.message} {hint}".strip()


def show_error(error: ApiError, action: str, form: str = "") -> None:
    st.error(f"**Could not {action}.** {plain(explain(error, form))}", icon=":material/error:")


def load(action: str, call: Callable[[], T]) -> T:
    """Run an API call the page cannot do without; on failure say why and stop drawing the page."""
    try:
        return call()
    except ApiError as error:
        show_error(error, action)
        st.stop()
        raise  # st.stop() raises; this keeps type checkers honest


def attempt(action: str, call: Callable[[], T]) -> T | None:
    """Run an API call one part of a page needs; on failure say why there and let the rest draw."""
    try:
        return call()
    except ApiError as error:
        show_error(error, action)
        return None


def notify(message: str) -> None:
    """Rerun the page and say what happened once it has redrawn with the change.

    `message` is Markdown written by the page: quote names through `plain`.
    """
    st.session_state[_NOTICE_KEY] = message
    st.rerun()


def show_notice() -> None:
    """The message left by `notify` on the previous run, shown once.

    It is forgotten only after it has been drawn: a run stopped for a newer one (a click that came
    in meanwhile) stops inside the `st` call, before drawing, and the next run shows it instead.
    """
    message = st.session_state.get(_NOTICE_KEY)
    if message:
        st.success(message, icon=":material/check_circle:")
        del st.session_state[_NOTICE_KEY]
