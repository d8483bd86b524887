"""The embedded demo's start, and the console's first render of every page at 1,000,000 jobs.

    .venv/bin/python bench/console.py                    # fresh SQLite, about five minutes
    .venv/bin/python -m bench.console --database-url postgresql://postgres@127.0.0.1:5432/bench
    .venv/bin/python bench/console.py --startup-only     # the demo's start alone, under a minute

The demo's start: `streamlit run app.py` with no ORGDECK_API_URL and a fresh data directory, opened
in a new tab of a running headless Chromium once the console listens (when Streamlit opens a browser,
or prints the address to open); timed from the command until the console answers its health check,
until the first page is drawn (its sidebar names the signed-in person), and until that page shows
the demo's data (the Overview's Agents tile counts more than none). Each start is a new process on
a new data directory, `--starts` times; the median of each part is reported. Each start is
followed by a restart on the same data directory, whose data shows once the service is up (the
demo is seeded once). Reaches: demo data ≤ 5 s after the command, on a start and on a restart.

Seeds what bench/deployments.py seeds (20 environments, 200 agents, 1,000,000 ended jobs over two
years, the pairs' states and the rollups), then opens each page the way a person does, as a new
browser session connected to a local `python -m service serve` (the app script run by AppTest, the
service on the server core). A page's first render is timed from the session's start until the
script finishes, including every call it makes to the service, in a console process that has
already shown every page once (what it imports is loaded); each page is opened `--rounds` times,
each in a new session, and the median is reported. Reaches: the Deployments page ≤ 1.5 s,
every other page ≤ 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.testing.v1 import AppTest

from bench.common import (
    REPO_ROOT,
    BenchError,
    format_table,
    free_port,
    orgdeck_service,
    run,
    scratch_directory,
    wait_until_answering,
)
from bench.deployments import JOBS, create_catalogue, seed
from bench.notifications import open_database

# Every page of the console, so that a new one is measured too.
PAGES = sorted(str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "pages").glob("*.py"))
REACH_SECONDS = {"pages/deployments.py": 1.5}
DEFAULT_REACH_SECONDS = 1.0
STARTUP_REACH_SECONDS = 5.0
STARTUP_TIMEOUT_MS = 120_000
CHROMIUM = os.environ.get("ORGDECK_CHROMIUM", "/usr/bin/chromium")
DATA_SHOWN, RESTART_PART = "demo data shown", "demo data shown, restarted"
SIGNED_IN = "() => document.querySelector('[data-testid=stSidebar]')?.textContent.includes('Signed in as')"
# The Overview's Agents tile, counting more than none.
AGENTS_COUNTED = """() => [...document.querySelectorAll('[data-testid=stMetric]')].some(
    (tile) => tile.textContent.includes('Agents')
        && !['', '0'].includes(tile.querySelector('[data-testid=stMetricValue]')?.textContent.trim() ?? ''))"""
STARTUP_PARTS = ("console answers", "first page drawn", DATA_SHOWN)


def demo_start(browser: object, data_dir: Path) -> dict[str, float]:
    """Seconds from `streamlit run app.py` to each of STARTUP_PARTS, on a fresh data directory."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGDECK_")}
    env["ORGDECK_DATA_DIR"] = str(data_dir)
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log = log_path.open("w")
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    context = None
    try:
        url = f"http://127.0.0.1:{port}"
        # Refused until Streamlit listens; asked often, since the answer's moment is a figure.
        wait_until_answering(
            process, f"{url}/_stcore/health", name="the console", log_path=log_path, every=0.02
        )
        parts = {"console answers": time.perf_counter() - started}
        # Opened once the console listens, as Streamlit opens a browser's tab (or prints the address
        # to open) then. Opened at once and asked again every 50 ms, Chromium drew its error page
        # twenty times a second, a core and a half taken from the console's and the service's start.
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.goto(url, timeout=STARTUP_TIMEOUT_MS)
        # Looked for at every frame the page draws: a locator's wait looks every 500 ms after its
        # first few tries, which made these figures up to half a second late.
        page.wait_for_function(SIGNED_IN, polling="raf", timeout=STARTUP_TIMEOUT_MS)
        parts["first page drawn"] = time.perf_counter() - started
        page.wait_for_function(AGENTS_COUNTED, polling="raf", timeout=STARTUP_TIMEOUT_MS)
        parts[DATA_SHOWN] = time.perf_counter() - started
        return parts
    finally:
        if context is not None:
            context.close()
        process.terminate()
        process.wait(timeout=30)
        log.close()


def startup_table(starts: int) -> list[list[str]]:
    from playwright.sync_api import sync_playwright

    runs = []
    with scratch_directory() as workdir, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            for number in range(starts):
                data_dir = workdir / f"data-{number}"
                runs.append(demo_start(browser, data_dir))
                # The same data directory again, as a person's next `streamlit run app.py` finds it.
                runs[-1][RESTART_PART] = demo_start(browser, data_dir)[DATA_SHOWN]
                print(f"  start {number + 1}: {runs[-1]}", file=sys.stderr, flush=True)
        finally:
            browser.close()
    rows = []
    for part in (*STARTUP_PARTS, RESTART_PART):
        times = [parts[part] for parts in runs]
        median = statistics.median(times)
        reach, verdict = "", ""
        if part in {DATA_SHOWN, RESTART_PART}:
            reach = f"≤ {STARTUP_REACH_SECONDS:.1f}"
            verdict = "reached" if median <= STARTUP_REACH_SECONDS else "NOT reached"
        rows.append([part, f"{median:.2f}", f"{max(times):.2f}", reach, verdict])
    return rows


def first_render(page: str) -> float:
    """Seconds from a new session's start to the end of the page's first run."""
    app = AppTest.from_file(str(REPO_ROOT / "console.py"), default_timeout=120)
    app.switch_page(page)  # the session opens on this page, as a link to it does
    started = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - started
    if app.exception:
        raise BenchError(f"{page} raised: {app.exception[0].message}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/console.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a scratch PostgreSQL database instead of a fresh SQLite file")
    parser.add_argument("--jobs", type=int, default=JOBS, help="jobs to seed (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="new sessions per page (default %(default)s)")
    parser.add_argument("--starts", type=int, default=3, help="demo starts measured (default %(default)s)")
    parser.add_argument("--startup-only", action="store_true", help="measure the demo's start alone")
    args = parser.parse_args(argv)
    startup = startup_table(args.starts)
    print("The embedded demo's start (SQLite, a fresh data directory, then the same one again), median of")
    print(f"{args.starts}; seconds after `streamlit run app.py`, the page opened in headless Chromium")
    print()
    print(format_table(["Part", "median s", "worst s", "reach", ""], startup))
    if args.startup_only:  # a part of the bench: the whole one's kept results (bench/results) stay
        sys.exit(0)
    print()
    with scratch_directory() as workdir, orgdeck_service(workdir, database_url=args.database_url) as service:
        org = service.create_org()
        db = open_database(service)
        try:
            seed(db, create_catalogue(service.origin, org, db), args.jobs)
        finally:
            db.dispose()
        os.environ["ORGDECK_API_URL"] = service.url("/api")
        os.environ["ORGDECK_API_KEY"] = org.api_key
        # A console that has served anyone has imported what its pages use: one unmeasured pass.
        for page in PAGES:
            first_render(page)
        rows = []
        for page in PAGES:
            times = [first_render(page) for _ in range(args.rounds)]
            median = statistics.median(times)
            reach = REACH_SECONDS.get(page, DEFAULT_REACH_SECONDS)
            verdict = "reached" if median <= reach else "NOT reached"
            rows.append([page, f"{median:.2f}", f"{max(times):.2f}", f"≤ {reach:.1f}", verdict])
            print(f"  {page:<28} {median:.2f} s", file=sys.stderr, flush=True)
    print()
    print(f"{describe_setup_line(args)}; {args.jobs:,} jobs; each page's first render in a new session")
    print()
    print(format_table(["Page", "median s", "worst s", "reach", ""], rows))
    return 0


def describe_setup_line(args: argparse.Namespace) -> str:
    return "AppTest in this process, the service on core 0; " + (
        "PostgreSQL" if args.database_url else "SQLite (fresh file)"
    )


if __name__ == "__main__":
    run(main)
