"""The speed baseline: a bare FastAPI hello app and the anchor app against our service, in one run.

    .venv/bin/python bench/baseline.py                  # fresh SQLite, about three minutes
    .venv/bin/python -m bench.baseline --database-url postgresql://postgres@127.0.0.1:5432/bench

Measures the bare hello app, GET /api/health, the anchor app (bench/anchor.py: what
GET /api/api-keys does and nothing else, on the same database) and the authenticated one-query
GET /api/api-keys?orgSlug= (what later benches compare against), and prints requests/s, p50, p99
and their ratios. The reaches: /api/health at ≥ 0.8x the hello app's throughput with a p99 ≤ 1.25x
its p99; GET /api/api-keys at ≥ 0.5x the anchor's throughput with a p99 ≤ 2x its p99.
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
    Series,
    Target,
    add_arguments,
    anchor_server,
    describe_setup,
    format_table,
    hello_server,
    load_settings,
    measure,
    orgdeck_service,
    ratio,
    run,
    scratch_directory,
    series_rows,
)

MIN_HEALTH_THROUGHPUT = 0.8
MAX_HEALTH_P99 = 1.25
MIN_KEYS_THROUGHPUT = 0.5
MAX_KEYS_P99 = 2.0


def verdict(
    label: str, ours: Series, reference: Series, name: str, min_throughput: float, max_p99: float
) -> str:
    throughput = ratio(ours.requests_per_second, reference.requests_per_second)
    p99 = ratio(ours.p99_ms, reference.p99_ms)
    per_cpu = ratio(ours.requests_per_cpu_second, reference.requests_per_cpu_second)
    reached = throughput >= min_throughput and p99 <= max_p99
    return (
        f"{label}: {throughput:.2f}x {name}'s throughput (reach ≥ {min_throughput}x), "
        f"p99 {p99:.2f}x (reach ≤ {max_p99}x): {'reached' if reached else 'NOT reached'}; "
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
        keys = f"/api/api-keys?orgSlug={org.slug}"
        with anchor_server(workdir, service) as anchor:
            targets = [
                Target("bare FastAPI hello (async)", hello, "/"),
                Target("GET /api/health", service, "/api/health"),
                Target("anchor: the same read, nothing else", anchor, keys, headers=org.headers),
                Target("GET /api/api-keys?orgSlug= (key)", service, keys, headers=org.headers),
            ]
            series = measure(targets, load)
    print()
    print(describe_setup(load, args.database_url) + "; ratios against the bare hello app")
    print()
    print(format_table(SERIES_HEADERS + RATIO_HEADERS, series_rows(series, reference=series[0])))
    print()
    print(LEGEND)
    print()
    hello_app, health, anchor_app, api_keys = series
    print(verdict("/api/health", health, hello_app, "the hello app", MIN_HEALTH_THROUGHPUT, MAX_HEALTH_P99))
    print(verdict("GET /api/api-keys", api_keys, anchor_app, "the anchor", MIN_KEYS_THROUGHPUT, MAX_KEYS_P99))
    return 0


if __name__ == "__main__":
    run(main)
