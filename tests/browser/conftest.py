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
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, require

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
    log = (data_dir / "streamlit.log").open("w")
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url + "/_stcore/health", process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def _wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"streamlit exited with {process.returncode}")
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not come up in {timeout} s")


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


def grid_cells(page) -> list[str]:
    """The texts of a dataframe's cells (drawn on a canvas; the grid keeps an accessible copy)."""
    cells = page.locator("[data-testid=stDataFrame] [role=gridcell]")
    cells.first.wait_for(state="attached", timeout=30_000)
    return cells.all_text_contents()
