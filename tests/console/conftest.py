"""Console tests: the real app script under Streamlit's AppTest, talking to the live test service."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import Org
from tests.processes import ROOT

APP = str(ROOT / "console.py")


@pytest.fixture
def console(server, org: Org, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], AppTest]:
    """Open a page of the console as the test org, connected to the test service."""
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.setenv("ORGDECK_API_KEY", org.key)

    def open_page(page: str = "pages/overview.py") -> AppTest:
        app = AppTest.from_file(APP, default_timeout=60)
        app.run()
        if page != "pages/overview.py":
            app.switch_page(page)
            app.run()
        assert not app.exception, app.exception
        return app

    return open_page


def texts(app: AppTest) -> str:
    """Everything the page shows as text, to search in."""
    parts = [
        e.value
        for kind in ("title", "header", "subheader", "markdown", "caption", "code")
        for e in getattr(app, kind)
    ]
    parts += [e.value for e in (*app.success, *app.info, *app.warning, *app.error)]
    parts += [str(m.label) + " " + str(m.value) for m in app.metric]
    return "\n".join(str(p) for p in parts)


def select_row(app: AppTest, key: str, row: int) -> AppTest:
    """Select a table's row as a click does (AppTest cannot click a dataframe's canvas)."""
    app.session_state[key] = {"selection": {"rows": [row], "columns": []}}
    app.run()
    assert not app.exception, app.exception
    return app


def label_target(app: AppTest):
    """The Labels tab's version picker (keyed by the versions' labels, so its key changes)."""
    return next(box for box in app.selectbox if box.key and box.key.startswith("label_target:"))
