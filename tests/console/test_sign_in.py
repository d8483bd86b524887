"""Signing in to a console that serves a service: a personal key typed into the sidebar, kept in the
browser session only, one sign-in recorded per sign-in, and signing out."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from components.connection import http_pool
from tests.conftest import Org
from tests.console.conftest import APP, texts
from tests.processes import http_peer


@pytest.fixture
def without_key(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.delenv("ORGDECK_API_KEY", raising=False)


def sign_ins(server, org: Org) -> list[str]:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        return [e.actor.member_email for e in admin.audit.list(action="signIn").items]


def test_sign_in_with_a_personal_key_then_sign_out(server, org, without_key):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        dana = admin.members.create("dana@example.com", "Dana Reyes", "author")
        key = admin.api_keys.create("dana-browser", member_id=dana.id).key
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert "Not signed in" in texts(app)
    app.sidebar.text_input(key="sign_in_key").input(key)
    app.sidebar.button(key="sign_in").click().run()
    assert not app.exception
    sidebar = " ".join(m.value for m in app.sidebar.markdown)
    assert "Dana Reyes (dana@example.com)" in sidebar and "Role: **author**" in sidebar
    # The typed key is held by the session alone; the field it was typed into was emptied.
    assert app.session_state["signed_in_api_key"] == key
    assert "sign_in_key" not in app.session_state or app.session_state["sign_in_key"] == ""

    app.sidebar.button(key="sign_out").click().run()  # a second run with the key: no second sign-in
    assert "Not signed in" in texts(app)
    assert "signed_in_api_key" not in app.session_state
    assert [b.label for b in app.sidebar.button] == ["Sign in"]
    assert sign_ins(server, org) == ["dana@example.com"]

    app.sidebar.text_input(key="sign_in_key").input(key)
    app.sidebar.button(key="sign_in").click().run()
    assert "Role: **author**" in " ".join(m.value for m in app.sidebar.markdown)
    assert sign_ins(server, org) == ["dana@example.com", "dana@example.com"]


def test_a_refused_key_says_why_and_signs_nobody_in(server, org, without_key):
    app = AppTest.from_file(APP, default_timeout=60).run()
    app.sidebar.text_input(key="sign_in_key").input("odk_" + "A" * 38)
    app.sidebar.button(key="sign_in").click().run()
    assert app.sidebar.error, "a refused key is explained"
    assert "signed_in_api_key" not in app.session_state
    assert "Not signed in" in texts(app)
    assert sign_ins(server, org) == []


class _SetsACookie(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Set-Cookie", "proxy_session=dana; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_consoles_shared_pool_keeps_no_cookie():
    # Everyone signed in shares the pool: a cookie one answer sets (a proxy's session) must not
    # travel with the next person's requests.
    with http_peer(_SetsACookie) as peer:
        pool = http_pool()
        url = f"http://127.0.0.1:{peer.server_port}/"
        assert pool.get(url).headers["set-cookie"].startswith("proxy_session=")
        assert not pool.cookies
        assert "cookie" not in pool.get(url).request.headers
