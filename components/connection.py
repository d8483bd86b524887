"""Which service and organization the console talks to, and the shared client for it."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from api import OrgdeckClient

_STATE_KEY = "orgdeck_connection"


@dataclass(frozen=True)
class Connection:
    url: str
    api_key: str
    key_id: str
    org_slug: str
    org_name: str
    embedded: bool


@st.cache_resource(show_spinner=False)
def _client(url: str, api_key: str, org_slug: str) -> OrgdeckClient:
    # One client (and connection pool) per service and key, shared by every session and thread.
    return OrgdeckClient(url, api_key, org_slug=org_slug)


def set_connection(connection: Connection) -> None:
    st.session_state[_STATE_KEY] = connection


def current() -> Connection:
    connection = st.session_state.get(_STATE_KEY)
    if connection is None:
        _run_through_app_once()
        st.info("Not connected to a service: enter its URL and an API key in the sidebar.")
        st.stop()
    return connection


def _run_through_app_once() -> None:
    """Recover from a page having been run without app.py.

    Until app.py has called st.navigation once in a process, Streamlit treats a `pages/` folder the
    legacy way: a first visit straight to /api_keys runs that page alone, so nothing is connected.
    Switching the process to st.navigation routing and rerunning runs app.py, which opens the same page.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def client() -> OrgdeckClient:
    connection = current()
    return _client(connection.url, connection.api_key, connection.org_slug)
