"""Browser tests: `streamlit run app.py` in a subprocess, driven by headless Chromium.

One console process per test session (started on first use). Screenshots, at 1440 and 1024 px
wide, are kept in test-artifacts/screenshots (git-ignored); with ORGDECK_SCREENSHOT_DIR set they
are also written there for the README's tour (`name.png` at 1440 px, `name-1024.png`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import SESSION_ENCRYPTION_KEY, require
from tests.processes import ROOT, free_port, wait_until_up

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
    with running_console(tmp_path_factory.mktemp("console-data"), database_url) as url:
        yield url


@pytest.fixture(scope="session")
def service_console_url(tmp_path_factory: pytest.TempPathFactory, database_url: str, server) -> Iterator[str]:
    """A console of the test service, where each person signs in with their own key."""
    with running_console(tmp_path_factory.mktemp("service-console"), database_url, server.url) as url:
        yield url


@contextmanager
def running_console(
    data_dir: Path,
    database_url: str,
    api_url: str | None = None,
    api_key: str | None = None,
    secrets: str | None = None,
) -> Iterator[str]:
    """`streamlit run app.py` on a free port: embedded, or a client of the service at `api_url`
    (acting with `api_key` when given, else each person signs in). `secrets`: its secrets.toml,
    with `{url}` standing for the console's own address."""
    with console_process(data_dir, database_url, api_url, api_key, secrets) as (_process, url):
        yield url


@contextmanager
def console_process(
    data_dir: Path,
    database_url: str,
    api_url: str | None = None,
    api_key: str | None = None,
    secrets: str | None = None,
    *,
    run_worker: bool = False,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The console of `running_console` and its process, for a test that stops it itself; what it
    writes, stdout and stderr, is in data_dir/streamlit.log. `run_worker` only on a database of
    the test's own."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGDECK_API")}
    env.update({"ORGDECK_DATA_DIR": str(data_dir), "ORGDECK_DATABASE_URL": database_url})
    env["ORGDECK_ENCRYPTION_KEYS"] = SESSION_ENCRYPTION_KEY
    # The test service's worker runs the shared database's jobs; one worker is what tests expect.
    env["ORGDECK_RUN_WORKER"] = "true" if run_worker else "false"
    if api_url:
        env["ORGDECK_API_URL"] = api_url
    if api_key:
        env["ORGDECK_API_KEY"] = api_key
    data_dir.mkdir(parents=True, exist_ok=True)
    log = (data_dir / "streamlit.log").open("w")
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    url = f"http://127.0.0.1:{port}"
    if secrets is not None:
        secrets_file = data_dir / "secrets.toml"
        secrets_file.write_text(secrets.replace("{url}", url))
        command += ["--secrets.files", str(secrets_file)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(url + "/_stcore/health", process)
        yield process, url
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


def open_page(page, console_url: str, path: str, *wait_for: str) -> None:
    """Open a console page and wait until every given text is on screen."""
    page.goto(f"{console_url}/{path}")
    for text in wait_for:
        page.get_by_text(text).first.wait_for(timeout=60_000)


def grid_cells(page, timeout_ms: int = 30_000) -> list[str]:
    """The texts of the page's dataframe cells, once they have stopped changing.

    Dataframes are drawn on a canvas; the grid keeps an accessible copy of its cells in the DOM.
    Streamlit fills a page in several deltas, so the first cell to appear does not mean the last has,
    nor does a quiet moment while the page still runs (a busy machine): the page settles first.
    """
    cells = page.locator("[data-testid=stDataFrame] [role=gridcell]")
    cells.first.wait_for(state="attached", timeout=timeout_ms)
    settle(page)
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


ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
WIDE, NARROW = 1440, 1024
ROW_HEIGHT = 35  # of a dataframe's header and rows, in px


def settle(page, timeout_ms: int = 60_000) -> None:
    """Until the page has stopped running and has drawn what it draws late: no element left from
    the previous run, no placeholder of a table or a code block, no chart without its plot."""
    pending = (
        "[data-stale=true], [data-testid=stSkeleton], [data-testid=stStatusWidget], "
        "[data-testid=stPlotlyChart]:not(:has(.js-plotly-plot))"
    )
    quiet = 0
    for _ in range(timeout_ms // 200):
        quiet = quiet + 1 if page.locator(pending).count() == 0 else 0
        if quiet >= 3:
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"the page did not settle in {timeout_ms} ms")


def assert_no_exception(page) -> None:
    """No traceback, and no call to the service that failed."""
    settle(page)
    exceptions = page.locator("[data-testid=stException]")
    assert exceptions.count() == 0, exceptions.first.inner_text()
    failures = page.locator("[data-testid=stAlert]", has_text="Could not")
    assert failures.count() == 0, failures.first.inner_text()


def go(page, label: str) -> None:
    """To another page through the sidebar menu, as a person moves."""
    page.locator("[data-testid=stSidebar]").get_by_role("link", name=label).click()
    settle(page)


def click_row(page, table, text: str) -> None:
    """Select the row of a dataframe holding `text`, as a click on its row does.

    The grid is drawn on a canvas; its accessible copy in the DOM says which row holds the text.
    """
    table.locator("[role=gridcell]").first.wait_for(state="attached", timeout=30_000)
    rows = table.locator("[role=row]")
    # A table redrawn after a filter or a save may still show its former rows for a moment.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for i in range(rows.count()):
            if text in (rows.nth(i).text_content() or ""):
                index = int(rows.nth(i).get_attribute("aria-rowindex"))
                table.scroll_into_view_if_needed()
                box = table.bounding_box()
                assert box is not None
                page.mouse.click(box["x"] + 16, box["y"] + (index - 0.5) * ROW_HEIGHT)
                settle(page)
                return
        page.wait_for_timeout(250)
    raise AssertionError(f"no row holds {text!r}")


def shoot(page, name: str, *, widths: tuple[int, ...] = (WIDE, NARROW)) -> list[Path]:
    """The whole page at each width, kept as test artifacts (and for the README when configured)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    configured = os.environ.get("ORGDECK_SCREENSHOT_DIR")
    made = []
    for width in widths:
        page.set_viewport_size({"width": width, "height": 900})
        settle(page)
        # The console scrolls inside its main element: a window as tall as that shows it all.
        height = page.locator("[data-testid=stMain]").evaluate("main => main.scrollHeight")
        page.set_viewport_size({"width": width, "height": min(max(height, 900), 6000)})
        settle(page)
        page.wait_for_timeout(700)  # charts lay themselves out again at the new size
        path = ARTIFACTS / f"{name}-{width}.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 10_000, f"{path} is nearly empty"
        if configured:
            folder = Path(configured)
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / (f"{name}.png" if width == WIDE else f"{name}-{width}.png"))
        made.append(path)
    page.set_viewport_size({"width": WIDE, "height": 900})
    settle(page)
    return made


def choose(scope, label: str, option: str) -> None:
    """Pick `option` in the select box or multiselect labelled `label` within `scope`."""
    page = scope.page
    # A field typed into just before commits, and reruns the page, when it loses the focus: let it
    # do so now rather than while the list of options is open.
    page.evaluate("document.activeElement && document.activeElement.blur()")
    settle(page)
    box = scope.locator("[data-testid=stSelectbox], [data-testid=stMultiSelect]").filter(
        has=page.get_by_text(label, exact=True)
    )
    # Scrolled to before the click: a list of options opened and then scrolled away closes again.
    box.first.scroll_into_view_if_needed()
    box.first.locator("input").first.click()
    page.get_by_role("option", name=option, exact=True).first.click()
    page.keyboard.press("Escape")  # a multiselect stays open for more
    settle(page)


def form_with(page, button: str):
    """The form whose submit button reads `button`."""
    return page.locator("[data-testid=stForm]").filter(has=page.get_by_role("button", name=button))


# What a run leaves while under way: elements kept from the previous run, the running indicator.
RUNNING = "[data-stale=true], [data-testid=stStatusWidget]"
ANSWERS = "[data-testid=stAlert], [data-testid=stException]"


def submit(page, button: str, *, reaction_ms: int = 10_000) -> None:
    """Submit the form whose button reads `button`, as a person does: the field typed in last loses
    focus, then the button is clicked.

    A click the page never acted on (no run began, nothing said) is clicked again, as a person
    would: on a loaded machine Chromium has dropped one now and then. Whatever the page then says
    is the caller's to check; a form submitted twice says so (its item already exists).
    """
    page.evaluate("document.activeElement?.blur()")
    settle(page)
    before = page.locator(ANSWERS).all_inner_texts()
    for attempt in range(3):
        if attempt:
            warnings.warn(f"{page.url}: no run followed a click of {button!r}; clicking again", stacklevel=2)
        form_with(page, button).first.get_by_role("button", name=button, exact=True).click()
        for _ in range(reaction_ms // 100):
            if page.locator(RUNNING).count() or page.locator(ANSWERS).all_inner_texts() != before:
                return
            page.wait_for_timeout(100)
    raise AssertionError(f"the page never acted on a click of {button!r}")
