"""How the thread pool and connection pool sizes change the one-query baseline, GET /api/api-keys.

    .venv/bin/python -m bench.thread_pool                        # fresh SQLite, about two minutes
    .venv/bin/python -m bench.thread_pool --threads 1,2,4 --pool-sizes 4,8

Starts the service once per setting (ORGDECK_THREADS, then ORGDECK_DB_POOL_SIZE at the default
thread count) and measures the same authenticated request on each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    LEGEND,
    SERIES_HEADERS,
    LoadSettings,
    Series,
    Target,
    add_arguments,
    describe_setup,
    format_table,
    load_settings,
    measure,
    orgdeck_service,
    run,
    scratch_directory,
    series_rows,
)
from service.settings import Settings

DEFAULTS = Settings.model_fields
THREAD_COUNTS = "1,2,4,8,40"
POOL_SIZES = "2,8,32"


def measure_setting(
    workdir: Path, env: dict[str, str], load: LoadSettings, database_url: str | None
) -> Series:
    label = ", ".join(f"{name.removeprefix('ORGDECK_')}={value}" for name, value in env.items())
    with orgdeck_service(
        workdir, database_url=database_url, env=env, name=label.replace("=", "-")
    ) as service:
        org = service.create_org()
        target = Target(label, service, f"/api/api-keys?orgSlug={org.slug}", headers=org.headers)
        return measure([target], load)[0]


def integers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/thread_pool.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--threads", default=THREAD_COUNTS, help="ORGDECK_THREADS values (default %(default)s)"
    )
    parser.add_argument(
        "--pool-sizes", default=POOL_SIZES, help="ORGDECK_DB_POOL_SIZE values (default %(default)s)"
    )
    parser.set_defaults(rounds=2, seconds=5)
    args = parser.parse_args(argv)
    load = load_settings(args)
    print(f"Thread pool: {describe_setup(load, args.database_url)}", file=sys.stderr)
    settings: list[dict[str, str]] = [{"ORGDECK_THREADS": str(n)} for n in integers(args.threads)]
    settings += [{"ORGDECK_DB_POOL_SIZE": str(n)} for n in integers(args.pool_sizes)]
    with scratch_directory() as workdir:
        series = [measure_setting(workdir, env, load, args.database_url) for env in settings]
    defaults = (
        f"defaults: threads={DEFAULTS['threads'].default}, db_pool_size={DEFAULTS['db_pool_size'].default}"
    )
    print()
    print(f"GET /api/api-keys?orgSlug= (key); {describe_setup(load, args.database_url)}; {defaults}")
    print()
    print(format_table(SERIES_HEADERS, series_rows(series)))
    print()
    print(LEGEND)
    return 0


if __name__ == "__main__":
    run(main)
