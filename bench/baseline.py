"""The speed baseline: a bare FastAPI hello app against our service, in one run.

    .venv/bin/python bench/baseline.py                  # fresh SQLite, about two minutes
    .venv/bin/python -m bench.baseline --database-url postgresql://postgres@127.0.0.1:5432/bench

Measures the bare hello app, GET /api/health and the authenticated one-query
GET /api/api-keys?orgSlug= (what later benches compare against), and prints requests/s, p50, p99
and their ratios to the hello app. The reach: /api/health at ≥ 0.8x the hello app's throughput
with a p99 ≤ 1.25x its p99.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    LEGEND,
    RATIO_HEADERS,
    SERIES_HEADERS,
    BenchError,
    Series,
    Target,
    add_arguments,
    describe_setup,
    format_table,
    hello_server,
    load_settings,
    measure,
    orgdeck_service,
    ratio,
    scratch_directory,
    series_rows,
)

MIN_HEALTH_THROUGHPUT = 0.8
MAX_HEALTH_P99 = 1.25


def verdict(hello: Series, health: Series) -> str:
    throughput = ratio(health.requests_per_second, hello.requests_per_second)
    p99 = ratio(health.p99_ms, hello.p99_ms)
    per_cpu = ratio(health.requests_per_cpu_second, hello.requests_per_cpu_second)
    reached = throughput >= MIN_HEALTH_THROUGHPUT and p99 <= MAX_HEALTH_P99
    return (
        f"/api/health: {throughput:.2f}x the hello app's throughput (reach ≥ {MIN_HEALTH_THROUGHPUT}x), "
        f"p99 {p99:.2f}x (reach ≤ {MAX_HEALTH_P99}x): {'reached' if reached else 'NOT reached'}; "
        f"per CPU-second {per_cpu:.2f}x (the figure to trust on a busy machine)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/baseline.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    load = load_settings(args)
    print(f"Speed baseline: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with (
        scratch_directory() as workdir,
        hello_server(workdir) as hello,
        orgdeck_service(workdir, database_url=args.database_url) as service,
    ):
        org = service.create_org()
        targets = [
            Target("bare FastAPI hello (async)", hello, "/"),
            Target("GET /api/health", service, "/api/health"),
            Target(
                "GET /api/api-keys?orgSlug= (key)",
                service,
                f"/api/api-keys?orgSlug={org.slug}",
                headers=org.headers,
            ),
        ]
        series = measure(targets, load)
    print()
    print(describe_setup(load, args.database_url) + "; ratios against the bare hello app")
    print()
    print(format_table(SERIES_HEADERS + RATIO_HEADERS, series_rows(series, reference=series[0])))
    print()
    print(LEGEND)
    print()
    print(verdict(series[0], series[1]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as error:
        sys.exit(f"bench failed: {error}")
