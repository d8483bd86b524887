"""The console as a person sees it, in headless Chromium."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.browser.conftest import console_process, grid_cells, open_page
from tests.conftest import wait_for

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


def children(pid: int) -> set[int]:
    """The processes `pid` started (Linux's /proc): the console's embedded service."""
    return {
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    }


def alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\tZ (zombie)" not in status.read_text()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_stopping_the_console_stops_its_service_and_prints_no_traceback(page, tmp_path, stop):
    """Ctrl+C while the embedded service's worker and notification sender are busy with the demo's
    first jobs and deliveries: the console and its service end quietly. Killed outright, the console
    leaves no service behind either."""
    data_dir = tmp_path / "data"
    database_url = f"sqlite:///{tmp_path / 'console.db'}"
    with console_process(data_dir, database_url, run_worker=True) as (process, url):
        # A fresh demo's start, seeding included, on a machine the other tests keep busy.
        page.goto(url)
        page.get_by_text("What needs attention").first.wait_for(timeout=300_000)
        (service,) = children(process.pid)
        process.send_signal(stop)
        # Ctrl+C: uvicorn shuts down (the lifespan stops the service), then re-raises the signal,
        # which Click reports as "Aborted!" with status 1; a kill is a kill.
        assert process.wait(timeout=30) == (1 if stop == signal.SIGINT else -signal.SIGKILL)
        wait_for(lambda: not alive(service), timeout=30, what="the embedded service to end")
    log = (data_dir / "streamlit.log").read_text()
    assert "Traceback" not in log, log
