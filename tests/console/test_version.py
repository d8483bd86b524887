"""The console says which release it is, at the foot of its sidebar, connected or not."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from api.version import VERSION
from tests.console.conftest import APP


def test_the_sidebar_shows_the_version(console):
    app = console()
    assert [c.value for c in app.sidebar.caption][-1] == f"Orgdeck {VERSION}"


def test_the_version_shows_before_signing_in(server, monkeypatch):
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.delenv("ORGDECK_API_KEY", raising=False)
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert f"Orgdeck {VERSION}" in [c.value for c in app.sidebar.caption]
