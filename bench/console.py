"""The console's first render of every page at 1,000,000 jobs, under Streamlit's AppTest.

    .venv/bin/python bench/console.py                    # fresh SQLite, about five minutes
    .venv/bin/python -m bench.console --database-url postgresql://postgres@127.0.0.1:5432/bench

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
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.testing.v1 import AppTest

from bench.common import REPO_ROOT, BenchError, format_table, orgdeck_service, run, scratch_directory
from bench.deployments import JOBS, create_catalogue, seed
from bench.notifications import open_database

# Every page of the console, so that a new one is measured too.
PAGES = sorted(str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "pages").glob("*.py"))
REACH_SECONDS = {"pages/deployments.py": 1.5}
DEFAULT_REACH_SECONDS = 1.0


def first_render(page: str) -> float:
    """Seconds from a new session's start to the end of the page's first run."""
    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=120)
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
    args = parser.parse_args(argv)
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
