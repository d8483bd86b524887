"""Orgdeck console: `streamlit run app.py`.

With no ORGDECK_API_URL it starts an embedded service with a demo organization; with one, it is a
client of that service, authenticated by ORGDECK_API_KEY or a key typed into the sidebar.
"""

from __future__ import annotations

import os

import streamlit as st

from api import ApiError, OrgdeckClient
from api.system import Caller
from components import layout
from components.connection import Connection, set_connection
from components.feedback import explain, plain

st.set_page_config(page_title="Orgdeck", page_icon=":material/hub:", layout="wide")


@st.cache_resource(show_spinner="Starting the embedded service…")
def _embedded() -> tuple[str, str]:
    from service.embedded import start
    from service.settings import Settings

    embedded = start(Settings())
    return embedded.url, embedded.api_key


@st.cache_data(ttl=300, show_spinner=False)
def _identify(url: str, api_key: str) -> Caller:
    with OrgdeckClient(url, api_key, max_retries=1) as client:
        return client.whoami()


def _connect() -> Connection | None:
    url = os.environ.get("ORGDECK_API_URL", "").strip()
    embedded = not url
    if embedded:
        url, api_key = _embedded()
    else:
        api_key = os.environ.get("ORGDECK_API_KEY", "").strip() or st.session_state.get("typed_api_key", "")
        if not api_key:
            st.sidebar.text_input("API key", type="password", key="typed_api_key", placeholder="odk_…")
            return None
    try:
        caller = _identify(url, api_key)
    except ApiError as error:
        st.sidebar.error(explain(error))
        if not embedded:
            st.sidebar.text_input("API key", type="password", key="typed_api_key", placeholder="odk_…")
        return None
    return Connection(
        url=url,
        api_key=api_key,
        key_id=caller.key_id,
        org_slug=caller.org_slug,
        org_name=caller.org_name,
        embedded=embedded,
    )


MENU: dict[str, list[st.Page]] = {
    "Organization": [
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page("pages/environments.py", title="Environments", icon=":material/dns:"),
        st.Page("pages/tools.py", title="Tools", icon=":material/build:"),
    ],
    "Agents": [
        st.Page("pages/agents.py", title="Agents", icon=":material/robot_2:"),
        st.Page("pages/fleets.py", title="Fleets", icon=":material/hub:"),
        st.Page("pages/deployments.py", title="Deployments", icon=":material/rocket_launch:"),
        st.Page("pages/changes.py", title="Changes", icon=":material/approval:"),
    ],
    "Prompts": [
        st.Page("pages/registries.py", title="Registries", icon=":material/library_books:"),
    ],
    "Governance": [
        st.Page("pages/governance.py", title="Policies", icon=":material/policy:"),
        st.Page("pages/providers.py", title="LLM providers", icon=":material/smart_toy:"),
    ],
    "Settings": [
        st.Page("pages/api_keys.py", title="API keys", icon=":material/key:"),
        st.Page("pages/notifications.py", title="Notifications", icon=":material/notifications:"),
    ],
}


def _sidebar(connection: Connection | None) -> None:
    """The menu, drawn here rather than by st.navigation: Streamlit's own menu first paints the
    files of pages/ for a moment, so it is hidden (.streamlit/config.toml) and this one replaces it."""
    with st.sidebar:
        for section, pages in MENU.items():
            st.caption(section)
            for page in pages:
                st.page_link(page, width="stretch")
        st.divider()
        if connection is None:
            st.caption("Not connected")
            return
        st.markdown(f"**{plain(connection.org_name)}**  \n`{connection.org_slug}`")
        mode = "embedded demo service" if connection.embedded else "service"
        st.caption(f"Connected to the {mode} at {connection.url}")


connection = _connect()
if connection is not None:
    set_connection(connection)
navigation = st.navigation(MENU, position="hidden")
layout.install()
_sidebar(connection)
navigation.run()
