"""The console's embedded service, when it cannot start: the page says why, and a later run tries again."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.console.conftest import APP, texts
from tests.processes import free_port


def test_an_embedded_service_that_cannot_start_is_explained_on_the_page(tmp_path, monkeypatch):
    monkeypatch.delenv("ORGDECK_API_URL", raising=False)
    monkeypatch.delenv("ORGDECK_API_KEY", raising=False)
    monkeypatch.setenv("ORGDECK_DATA_DIR", str(tmp_path))
    # A database nothing listens on: the service ends before it is ready.
    monkeypatch.setenv("ORGDECK_DATABASE_URL", f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    shown = texts(app)
    assert "The embedded service stopped before it was ready" in shown, shown
    assert "Not connected" in shown, shown
    app.run()  # a failure is not kept: the next run starts the service again, and says so again
    assert "The embedded service stopped before it was ready" in texts(app)
