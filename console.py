"""Orgdeck console: the pages Streamlit serves (`streamlit run app.py` runs this script per session).

With no ORGDECK_API_URL it connects to the embedded service with a demo organization (started with
the console's process: app.py) and signs in as its admin; with one, it is a client of that
service, and each person signs in: with the company's identity provider when `[auth]` is configured
in .streamlit/secrets.toml (st.login; the person's ID token is the console's credential), else with
their own key in the sidebar (or the console acts with ORGDECK_API_KEY when it is set).
"""

from __future__ import annotations

import os

import streamlit as st

from api import ApiError
from api.constants import API_KEY_PREFIX
from api.system import Caller
from api.version import VERSION
from components import layout
from components.changes.waiting import menu_title
from components.connection import Connection, forget_client, http_pool, key_client, set_connection
from components.feedback import explain, plain
from service.runtime.launcher import EmbeddedServiceFailed, launch

st.set_page_config(page_title="Orgdeck", page_icon=":material/hub:", layout="wide")
# The layout's rules need no service: sent while it starts, with Streamlit's one-time look at how it
# was started (which walks the stack and reads its files) done then too.
layout.install()

# The typed key lives in this browser session's state and nowhere else; signing out forgets it.
SIGNED_IN_KEY = "signed_in_api_key"
SIGN_IN_RECORDED = "sign_in_recorded"
TYPED_KEY = "sign_in_key"
SIGN_IN_REFUSED = "sign_in_refused"


@st.cache_resource(show_spinner="Starting the embedded service…")
def _embedded() -> tuple[str, str]:
    # Started already by app.py when Streamlit serves; AppTest starts it here. A failure
    # is not cached: the next run starts it again.
    service = launch()
    # Made while the service starts, not after: the pool's TLS context takes tens of milliseconds.
    http_pool()
    demo = service.wait()
    return demo.url, demo.api_key


# Roles change rarely; a short cache keeps whoami off every rerun and a changed role shows soon.
@st.cache_data(ttl=30, show_spinner=False)
def _identify(url: str, api_key: str) -> Caller:
    with key_client(url, api_key) as client:
        return client.whoami()


def _identity_provider() -> bool:
    """Whether people sign in with the identity provider: `[auth]` in the console's secrets."""
    try:
        return "auth" in st.secrets
    except FileNotFoundError:  # no secrets file at all
        return False


def _id_token() -> str:
    """The signed-in person's ID token (`expose_tokens = ["id"]` in `[auth]`), or ""."""
    if not st.user.is_logged_in:
        return ""
    return st.user.tokens.get("id", "")


def _connect() -> Connection | None:
    """The service and the signed-in caller: the embedded demo's admin, the key the console was
    started with (ORGDECK_API_KEY), the person signed in with the identity provider (their ID
    token), or the personal key typed into the sidebar's sign-in."""
    url = os.environ.get("ORGDECK_API_URL", "").strip()
    embedded = not url
    if embedded:
        try:
            url, api_key = _embedded()
        except EmbeddedServiceFailed as failure:
            st.error(f"{failure}. Fix what it says, then reload this page.", icon=":material/error:")
            return None
    elif os.environ.get("ORGDECK_API_KEY", "").strip():
        api_key = os.environ["ORGDECK_API_KEY"].strip()
    elif _identity_provider():
        api_key = _id_token()
    else:
        api_key = st.session_state.get(SIGNED_IN_KEY, "")
    if not api_key:
        return None
    try:
        caller = _identify(url, api_key)
        _record_sign_in(url, api_key)
    except ApiError as error:
        st.sidebar.error(explain(error))
        st.session_state.pop(SIGNED_IN_KEY, None)
        return None
    return Connection(url=url, api_key=api_key, caller=caller, embedded=embedded)


def _signs_in() -> bool:
    """Whether each person signs in with their own key: a service named, and no key set for all."""
    return (
        bool(os.environ.get("ORGDECK_API_URL", "").strip())
        and not os.environ.get("ORGDECK_API_KEY", "").strip()
    )


def _sign_in_form(url: str) -> None:
    """Asks for a personal key, kept in this browser session's state only (never written anywhere)."""
    st.markdown("**Sign in**")
    st.text_input("Your API key", type="password", key=TYPED_KEY, placeholder="odk_…")
    st.button("Sign in", type="primary", width="stretch", key="sign_in", on_click=_sign_in, args=(url,))
    refused = st.session_state.pop(SIGN_IN_REFUSED, None)
    if refused:
        st.error(refused)


def _sign_in(url: str) -> None:
    """The key typed, if the service knows it, becomes the session's; the field is emptied either way."""
    typed = st.session_state.get(TYPED_KEY, "").strip()
    st.session_state[TYPED_KEY] = ""
    if not typed:
        return
    try:
        _identify(url, typed)
    except ApiError as error:
        st.session_state[SIGN_IN_REFUSED] = explain(error)
        return
    st.session_state[SIGNED_IN_KEY] = typed


def _record_sign_in(url: str, api_key: str) -> None:
    """POST /sign-in once per sign-in: the audit trail says who opened the console, and when. (An
    identity provider's token is on the trail from its first request.)"""
    if st.session_state.get(SIGN_IN_RECORDED) == (url, api_key) or not api_key.startswith(API_KEY_PREFIX):
        return
    with key_client(url, api_key) as client:
        client.sign_in()
    st.session_state[SIGN_IN_RECORDED] = (url, api_key)


def _sign_out_of_identity_provider(connection: Connection) -> None:
    """End the token's session at the service (on the audit trail; the token is refused from now
    on), then Streamlit's own session."""
    try:
        with key_client(connection.url, connection.api_key) as client:
            client.sign_out()
    except ApiError:
        pass  # the token is already refused (expired, signed out): nothing left to end
    _identify.clear(connection.url, connection.api_key)
    forget_client(connection.url, connection.api_key, connection.org_slug)
    set_connection(None)
    st.logout()


def _sign_out(connection: Connection) -> None:
    st.session_state.pop(SIGNED_IN_KEY, None)
    st.session_state.pop(SIGN_IN_RECORDED, None)
    _identify.clear(connection.url, connection.api_key)
    forget_client(connection.url, connection.api_key, connection.org_slug)
    set_connection(None)


connection = _connect()
set_connection(connection)
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
        st.Page("pages/changes.py", title=menu_title(connection), icon=":material/approval:"),
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
        st.Page("pages/members.py", title="Members", icon=":material/group:"),
        st.Page("pages/activity.py", title="Activity", icon=":material/history:"),
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
            if _signs_in() and _identity_provider():
                st.button("Sign in", type="primary", width="stretch", key="sign_in_sso", on_click=st.login)
            elif _signs_in():
                _sign_in_form(os.environ["ORGDECK_API_URL"].strip())
            else:
                st.caption("Not connected")
            return
        st.markdown(f"**{plain(connection.org_name)}**  \n`{connection.org_slug}`")
        st.markdown(
            f"Signed in as **{plain(_who(connection.caller))}**  \nRole: **{connection.caller.role}**"
        )
        mode = "embedded demo service" if connection.embedded else "service"
        st.caption(f"Connected to the {mode} at {connection.url}")
        if connection.caller.via == "oidc":
            st.button(
                "Sign out",
                key="sign_out",
                width="stretch",
                on_click=_sign_out_of_identity_provider,
                args=(connection,),
            )
        elif st.session_state.get(SIGNED_IN_KEY):
            st.button("Sign out", key="sign_out", width="stretch", on_click=_sign_out, args=(connection,))


def _who(caller: Caller) -> str:
    if caller.member is None:
        return f"service key {caller.key_name}"
    return f"{caller.member.name} ({caller.member.email})"


navigation = st.navigation(MENU, position="hidden")
_sidebar(connection)
st.sidebar.caption(f"Orgdeck {VERSION}")
navigation.run()
