"""Which service and organization the console talks to, and the shared client for it."""

from __future__ import annotations

from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy

import httpx
import streamlit as st

from api import OrgdeckClient
from api.client import new_http_client
from api.system import Caller

_STATE_KEY = "orgdeck_connection"


@dataclass(frozen=True)
class Connection:
    url: str
    api_key: str
    caller: Caller
    embedded: bool

    @property
    def key_id(self) -> str:
        return self.caller.key_id

    @property
    def org_slug(self) -> str:
        return self.caller.org_slug

    @property
    def org_name(self) -> str:
        return self.caller.org_name


@st.cache_resource(show_spinner=False)
def http_pool() -> httpx.Client:
    """The console's one connection pool, under every client it makes: a pool of its own made each
    of them 20 to 40 ms slower to start, three times over before a first page. Shared by everyone
    signed in, it keeps no cookies (credentials travel on each request; a proxy's session cookie
    must not pass from one person to the next)."""
    pool = new_http_client()
    pool.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    return pool


def key_client(url: str, api_key: str) -> OrgdeckClient:
    """A client of a key before its connection is known (whoami, sign-in, sign-out), tried twice."""
    return OrgdeckClient(url, api_key, max_retries=1, http_client=http_pool())


@st.cache_resource(show_spinner=False)
def _client(url: str, api_key: str, org_slug: str) -> OrgdeckClient:
    # One client per service and key, shared by every session and thread.
    return OrgdeckClient(url, api_key, org_slug=org_slug, http_client=http_pool())


def set_connection(connection: Connection | None) -> None:
    if connection is None:
        st.session_state.pop(_STATE_KEY, None)
    else:
        st.session_state[_STATE_KEY] = connection


def forget_client(url: str, api_key: str, org_slug: str) -> None:
    """Drop the shared client of a key that signed out, so the key leaves the process with it."""
    _client.clear(url, api_key, org_slug)


def current() -> Connection:
    connection = st.session_state.get(_STATE_KEY)
    if connection is None:
        _run_through_app_once()
        st.info("Not signed in: enter your personal API key in the sidebar.")
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
