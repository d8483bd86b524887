from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.console.conftest import APP, texts


def test_overview_shows_the_org_health_and_counts(console, org):
    app = console()
    shown = texts(app)
    assert "Test Org" in shown
    assert org.slug in shown
    assert "Service OK" in shown
    assert "Active API keys 1" in shown


def test_sidebar_says_which_service_and_org(console, server, org):
    app = console()
    sidebar = " ".join(str(e.value) for e in (*app.sidebar.markdown, *app.sidebar.caption))
    assert org.slug in sidebar
    assert server.url in sidebar


def test_a_refused_key_is_explained_not_a_traceback(server, monkeypatch):
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.setenv("ORGDECK_API_KEY", "odk_this_is_not_valid")
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception
    assert "malformed" in app.sidebar.error[0].value
    assert "Not connected" in texts(app)


def test_unreachable_service_is_explained(monkeypatch):
    monkeypatch.setenv("ORGDECK_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("ORGDECK_API_KEY", "odk_whatever")
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception
    assert "Is the service running" in app.sidebar.error[0].value
