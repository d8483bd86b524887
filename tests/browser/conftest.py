"""Browser tests: `streamlit run app.py` in a subprocess, driven by headless Chromium.

One console process per test session (started on first use). Screenshots go to
ORGDECK_SCREENSHOT_DIR when set (the README's tour is made this way), else to a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, SESSION_ENCRYPTION_KEY, require, wait_until_up

CHROMIUM = os.environ.get("ORGDECK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def console_url(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[str]:
    """A console with its embedded service and demo org, on a fresh data directory."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data_dir = tmp_path_factory.mktemp("console-data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGDECK_API")}
    env.update({"ORGDECK_DATA_DIR": str(data_dir), "ORGDECK_DATABASE_URL": database_url})
    env["ORGDECK_ENCRYPTION_KEYS"] = SESSION_ENCRYPTION_KEY
    # The test service's worker runs the shared database's jobs; one worker is what tests expect.
    env["ORGDECK_RUN_WORKER"] = "false"
    log = (data_dir / "streamlit.log").open("w")
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url + "/_stcore/health", process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        require("Chromium", f"{CHROMIUM} not found (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        require("Chromium", f"playwright is not installed: {exc}")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("ORGDECK_SCREENSHOT_DIR")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(page, console_url: str, path: str, *wait_for: str) -> None:
    """Open a console page and wait until every given text is on screen."""
    page.goto(f"{console_url}/{path}")
    for text in wait_for:
        page.get_by_text(text).first.wait_for(timeout=60_000)


def grid_cells(page, timeout_ms: int = 30_000) -> list[str]:
    """The texts of the page's dataframe cells, once they have stopped changing.

    Dataframes are drawn on a canvas; the grid keeps an accessible copy of its cells in the DOM.
    Streamlit fills a page in several deltas, so the first cell to appear does not mean the last has.
    """
    cells = page.locator("[data-testid=stDataFrame] [role=gridcell]")
    cells.first.wait_for(state="attached", timeout=timeout_ms)
    previous: list[str] = []
    unchanged = 0
    for _ in range(timeout_ms // 250):
        current = cells.all_text_contents()
        unchanged = unchanged + 1 if current == previous else 0
        if unchanged >= 3:
            break
        previous = current
        page.wait_for_timeout(250)
    return previous
