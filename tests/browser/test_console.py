"""The console as a person sees it, in headless Chromium."""

from __future__ import annotations

import signal

import pytest

from tests.browser.conftest import console_process, grid_cells, open_page

pytestmark = pytest.mark.browser


def test_first_run_shows_the_demo_org_and_says_it_is_demo_data(page, console_url):
    open_page(page, console_url, "", "What needs attention")
    assert page.get_by_text("Demo Organization").first.is_visible()
    assert page.get_by_text("embedded demo service").first.is_visible()
    assert page.get_by_text("This is demo data.").first.is_visible()


def test_api_keys_page_lists_the_demo_keys(page, console_url):
    open_page(page, console_url, "api_keys", "New key name")
    cells = grid_cells(page)
    assert {"console", "ci-pipeline", "grafana-exporter"} <= set(cells)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stopping_the_console_prints_no_traceback(page, tmp_path, stop):
    """Ctrl+C or a service manager's stop while the embedded service's worker and notification
    sender are busy with the demo's first jobs and deliveries: the console ends quietly."""
    data_dir = tmp_path / "data"
    database_url = f"sqlite:///{tmp_path / 'console.db'}"
    with console_process(data_dir, database_url, run_worker=True) as (process, url):
        # A fresh demo's start, seeding included, on a machine the other tests keep busy.
        page.goto(url)
        page.get_by_text("What needs attention").first.wait_for(timeout=300_000)
        process.send_signal(stop)
        assert process.wait(timeout=30) == 0
    log = (data_dir / "streamlit.log").read_text()
    assert "Traceback" not in log, log
    assert "Stopping..." in log, log
