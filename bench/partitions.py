"""The notification log range-partitioned by month on PostgreSQL, at 10,000,000 rows.

    .venv/bin/python -m bench.partitions --database-url postgresql://postgres@127.0.0.1:5432/bench_partitions

PostgreSQL only, on a scratch database: the bench drops its public schema and migrates a fresh one.
Seeds BASELINE_ROWS attempts over DAYS days (COPY, with the log's count triggers on, as for any
writer) and measures the baseline: the log's first page as GET /notifications/logs runs it (the
function the route calls, over a Session; unfiltered, and one channel's `sent` attempts of 7 days),
median and p99 of RUNS runs, then retention's prune of the oldest PRUNED_DAYS days in batches of
1,000 (the worker's statement), its total and longest transaction. Grows the log to `--rows` over
the same days, measures the same again, partitions the table by month following docs/operations.md
(timed), measures again on the partitioned table, and drops its oldest month (detach, drop, and the
month's counts): timed.
Reach: at `--rows`, partitioned or not, the first page's median ≤ 2x the baseline's and the prune's
mean batch and longest transaction ≤ 2x the baseline's (the longest is one transaction of hundreds:
on a busy machine it measures the machine as much as the prune). Every step's row counts are checked; a wrong one fails the
bench.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, func, select, text

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.notifications import LogQuery
from bench.common import BenchError, format_table, ratio, run, scratch_directory, times
from bench.retention import BATCH, batched
from service.notifications import logs
from service.notifications.models import DeliveryLogRow
from service.orgs.models import OrganizationRow
from service.settings import Settings
from service.storage.db import Database, utcnow
from service.storage.ids import first_id_at, new_id
from service.storage.migrate import upgrade

BASELINE_ROWS = 200_000
ROWS = 10_000_000
DAYS = 100
PRUNED_DAYS = 10
RUNS = 50
WARMUP_RUNS = 5
CHANNELS = 3
COPY_BATCH = 100_000
WINDOW = timedelta(days=7)
MAX_PAGE_MEDIAN = 2.0
MAX_LONGEST_TRANSACTION = 2.0
TABLE = DeliveryLogRow.__tablename__
COUNT_TABLES = {"notification_log_counts": "hour", "notification_log_day_counts": "day"}
COLUMNS = ("id", "org_id", "delivery_id", "event_id", "event_type", "channel_id", "channel_name")
COLUMNS += ("channel_kind", "attempt", "status", "created_at")
# The count triggers are the migrations' own statements: the partitioned table gets the same ones.
COUNT_MIGRATIONS = ("0012_notification_log_counts", "0024_notification_log_day_counts")


@dataclass(frozen=True)
class Log:
    """The bench's organization, its channels, and the instant its days end."""

    org_id: str
    org_slug: str
    channel_ids: list[str]
    now: datetime


@dataclass(frozen=True)
class Page:
    median_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Prune:
    total_s: float
    longest_ms: float
    rows: int

    @property
    def batch_ms(self) -> float:
        """The mean batch's time: flat when a batch costs the same however many came before it."""
        return self.total_s * 1000 / max(1, -(-self.rows // BATCH))


@dataclass(frozen=True)
class Stage:
    label: str
    rows: int
    page: Page
    filtered: Page
    prune: Prune


# --- Setting up --------------------------------------------------------------------------------


def fresh_schema(db: Database) -> None:
    """Everything in the scratch database dropped, then migrated from nothing."""
    with db.engine.connect() as connection:
        connection.exec_driver_sql("DROP SCHEMA public CASCADE")
        connection.exec_driver_sql("CREATE SCHEMA public")
        connection.commit()
    upgrade(db)


def create_log(db: Database, now: datetime) -> Log:
    with db.session(write=True) as session:
        org = OrganizationRow(slug="bench-partitions", name="Bench")
        session.add(org)
        session.flush()
        org_id = org.id
    return Log(org_id, "bench-partitions", [new_id("ch") for _ in range(CHANNELS)], now)


def attempts(log: Log, count: int) -> Iterator[tuple[object, ...]]:
    """`count` attempts spread evenly over the DAYS days before `log.now`, oldest first, with
    time-ordered ids of their instants (as the sender's would be)."""
    rng = random.Random(count)
    start, step = log.now.timestamp() - DAYS * 86_400, DAYS * 86_400 / count
    for index in range(count):
        moment = datetime.fromtimestamp(start + step * (index + rng.random()), UTC)
        status = "sent" if index % 5 else "failed"
        yield (
            new_id("log", at=moment, randbits=rng.getrandbits),
            log.org_id,
            new_id("msg", at=moment, randbits=rng.getrandbits),
            new_id("evt", at=moment, randbits=rng.getrandbits),
            "deployment.succeeded",
            log.channel_ids[index % CHANNELS],
            f"bench {index % CHANNELS}",
            "webhook",
            1,
            status,
            moment,
        )


def seed(db: Database, log: Log, count: int) -> float:
    """COPY `count` attempts in statements of COPY_BATCH (the count triggers run per statement),
    then VACUUM ANALYZE as autovacuum soon would; the seconds it took."""
    started = time.perf_counter()
    rows = attempts(log, count)
    raw, done = db.engine.raw_connection(), 0
    try:
        for _ in range(0, count, COPY_BATCH):
            with (
                raw.cursor() as cursor,
                cursor.copy(f"COPY {TABLE} ({', '.join(COLUMNS)}) FROM STDIN") as copy,
            ):
                for row in (next(rows, None) for _ in range(COPY_BATCH)):
                    if row is not None:
                        copy.write_row(row)
            raw.commit()
            if (done := done + COPY_BATCH) % 1_000_000 == 0:
                print(f"  {done:,} of {count:,} copied", file=sys.stderr, flush=True)
    finally:
        raw.close()
    analyze(db)
    return time.perf_counter() - started


def analyze(db: Database) -> None:
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table in (TABLE, *COUNT_TABLES):
            connection.exec_driver_sql(f"VACUUM ANALYZE {table}")


def count_logs(db: Database, org_id: str, below_id: str | None = None) -> int:
    query = select(func.count()).select_from(DeliveryLogRow).where(DeliveryLogRow.org_id == org_id)
    if below_id is not None:
        query = query.where(DeliveryLogRow.id < below_id)
    with db.session() as session:
        return session.scalar(query) or 0


def check(what: str, found: int, expected: int) -> None:
    if found != expected:
        raise BenchError(f"{what}: {found:,} rows where {expected:,} were expected")


# --- Measuring ---------------------------------------------------------------------------------


def first_page(db: Database, log: Log, query: LogQuery) -> Page:
    """The page as the route gets it: logs.list_logs over a reading session, RUNS times."""

    def once() -> float:
        started = time.perf_counter()
        with db.session() as session:
            page = logs.list_logs(session, org_id=log.org_id, query=query)
        if not page.entries:
            raise BenchError(f"an empty first page for {query}")
        return (time.perf_counter() - started) * 1000

    for _ in range(WARMUP_RUNS):
        once()
    runs = sorted(once() for _ in range(RUNS))
    return Page(statistics.median(runs), statistics.quantiles(runs, n=100)[98])


def queries(log: Log) -> tuple[LogQuery, LogQuery]:
    """The log's default first page, and one channel's `sent` attempts of the last 7 days."""
    end = log.now.replace(second=0, microsecond=0)
    filtered = {
        "channelId": log.channel_ids[0],
        "status": ["sent"],
        "dateRange": {"start": stamp(end - WINDOW), "end": stamp(end)},
    }
    return LogQuery.model_validate({"orgSlug": log.org_slug}), LogQuery.model_validate(
        {"orgSlug": log.org_slug, **filtered}
    )


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def prune(db: Database, log: Log, cutoff: datetime) -> Prune:
    """What is older than `cutoff`, pruned as the worker prunes: batches, each its own transaction."""
    cutoff_id = first_id_at("log", cutoff)
    expected = count_logs(db, log.org_id, cutoff_id)
    total, longest, deleted = batched(db, cutoff_id)
    check("pruned", deleted, expected)
    check("left older than the cutoff", count_logs(db, log.org_id, cutoff_id), 0)
    return Prune(total, longest * 1000, deleted)


def measure_stage(db: Database, log: Log, label: str, cutoff: datetime) -> Stage:
    rows = count_logs(db, log.org_id)
    page_query, filtered_query = queries(log)
    page, filtered = first_page(db, log, page_query), first_page(db, log, filtered_query)
    print(f"{label}: {rows:,} rows, first page {page.median_ms:.2f} ms", file=sys.stderr, flush=True)
    return Stage(label, rows, page, filtered, prune(db, log, cutoff))


# --- Partitioning ------------------------------------------------------------------------------


def months(first: datetime, last: datetime) -> Iterator[datetime]:
    """The first instant of every UTC month from `first`'s to `last`'s."""
    month = first.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while month <= last:
        yield month
        month = next_month(month)


def next_month(month: datetime) -> datetime:
    return (month + timedelta(days=32)).replace(day=1)


def partition_name(month: datetime) -> str:
    return f"{TABLE}_{month:%Y_%m}"


def count_triggers() -> list[str]:
    """The CREATE TRIGGER statements of the log's count triggers (their functions stay as they are)."""
    statements = []
    for name in COUNT_MIGRATIONS:
        migration = importlib.import_module(f"service.migrations.versions.{name}")
        statements += [s for s in migration.POSTGRESQL_TRIGGERS if s.strip().startswith("CREATE TRIGGER")]
    return statements


def partitioning_statements(partitions: list[datetime]) -> list[str]:
    """docs/operations.md's procedure for notification_logs, one statement at a time."""
    old = f"{TABLE}_unpartitioned"
    statements = [
        f"ALTER TABLE {TABLE} RENAME TO {old}",
        f"CREATE TABLE {TABLE} (LIKE {old} INCLUDING ALL) PARTITION BY RANGE (id)",
    ]
    for month, following in itertools.pairwise(partitions):
        statements.append(
            f"CREATE TABLE {partition_name(month)} PARTITION OF {TABLE} "
            f"FOR VALUES FROM ('{first_id_at('log', month)}') TO ('{first_id_at('log', following)}')"
        )
    statements += [
        f"CREATE TABLE {TABLE}_default PARTITION OF {TABLE} DEFAULT",
        f"INSERT INTO {TABLE} SELECT * FROM {old}",  # noqa: S608 (constant SQL)
        *count_triggers(),
        f"DROP TABLE {old}",
        f"ALTER TABLE {TABLE} ADD CONSTRAINT fk_{TABLE}_org_id_organizations FOREIGN KEY (org_id) "
        "REFERENCES organizations (id) ON DELETE CASCADE",
        f"ALTER INDEX {TABLE}_pkey RENAME TO pk_{TABLE}",
        *(
            f"ALTER INDEX {TABLE}_{columns}_idx RENAME TO ix_{TABLE}_{columns}"
            for columns in (
                "delivery_id_attempt",
                "org_id_channel_id_status_created_at_id",
                "org_id_created_at_id",
            )
        ),
    ]
    return statements


def partition(db: Database, log: Log) -> float:
    """The table partitioned by month in one transaction, from the oldest row's month to next
    month's (made ahead, as a cron job would); the seconds it took. ANALYZE follows, untimed:
    autovacuum never analyzes a partitioned table itself."""
    rows = count_logs(db, log.org_id)
    partitions = list(months(log.now - timedelta(days=DAYS), log.now + timedelta(days=62)))
    started = time.perf_counter()
    with db.engine.begin() as connection:
        for statement in partitioning_statements(partitions):
            connection.exec_driver_sql(statement)
    took = time.perf_counter() - started
    analyze(db)
    check("partitioned", count_logs(db, log.org_id), rows)
    with db.engine.connect() as connection:
        check(
            "left in the default partition",
            connection.scalar(text(f"SELECT count(*) FROM {TABLE}_default")),  # noqa: S608 (constant SQL)
            0,
        )
        check("triggers on the partitioned table", connection.scalar(text(TRIGGERS), {"table": TABLE}), 4)
    return took


TRIGGERS = (
    "SELECT count(*) FROM pg_trigger WHERE tgrelid = CAST(:table AS regclass) AND NOT tgisinternal "
    "AND tgname LIKE 'notification_logs_%counted'"
)


@dataclass(frozen=True)
class Drop:
    month: datetime
    seconds: float
    rows: int


def drop_oldest_month(db: Database, log: Log) -> Drop:
    """The oldest month that still has rows: detached, dropped, and its hourly and daily counts
    deleted (a DROP fires no delete trigger). Checks the rest of the log is untouched."""
    month = next(
        month
        for month in months(log.now - timedelta(days=DAYS), log.now)
        if count_logs(db, log.org_id, first_id_at("log", next_month(month)))
    )
    following = next_month(month)
    before, in_month = count_logs(db, log.org_id), count_logs(db, log.org_id, first_id_at("log", following))
    name = partition_name(month)
    started = time.perf_counter()
    with db.engine.begin() as connection:
        connection.exec_driver_sql(f"ALTER TABLE {TABLE} DETACH PARTITION {name}")
        connection.exec_driver_sql(f"DROP TABLE {name}")
        delete_counts(connection, month, following)
    took = time.perf_counter() - started
    check("left after the drop", count_logs(db, log.org_id), before - in_month)
    return Drop(month, took, in_month)


def delete_counts(connection: Connection, month: datetime, following: datetime) -> None:
    for table, period in COUNT_TABLES.items():
        connection.execute(
            text(f"DELETE FROM {table} WHERE {period} >= :start AND {period} < :end"),  # noqa: S608 (constant SQL)
            {"start": month, "end": following},
        )


# --- Reporting ---------------------------------------------------------------------------------


def stage_rows(stages: list[Stage]) -> list[list[str]]:
    baseline = stages[0]

    def page_cells(page: Page, reference: Page) -> list[str]:
        return [
            f"{page.median_ms:.2f}",
            f"{page.p99_ms:.2f}",
            times(ratio(page.median_ms, reference.median_ms)),
        ]

    return [
        [
            stage.label,
            f"{stage.rows:,}",
            *page_cells(stage.page, baseline.page),
            *page_cells(stage.filtered, baseline.filtered),
            f"{stage.prune.rows:,}",
            f"{stage.prune.total_s:.2f}",
            f"{stage.prune.batch_ms:.1f}",
            times(ratio(stage.prune.batch_ms, baseline.prune.batch_ms)),
            f"{stage.prune.longest_ms:.1f}",
            times(ratio(stage.prune.longest_ms, baseline.prune.longest_ms)),
        ]
        for stage in stages
    ]


def verdicts(stages: list[Stage]) -> list[str]:
    baseline, lines = stages[0], []
    for stage in stages[1:]:
        for what, value, reach in (
            ("first page median", ratio(stage.page.median_ms, baseline.page.median_ms), MAX_PAGE_MEDIAN),
            (
                "filtered first page median",
                ratio(stage.filtered.median_ms, baseline.filtered.median_ms),
                MAX_PAGE_MEDIAN,
            ),
            (
                "prune's mean batch",
                ratio(stage.prune.batch_ms, baseline.prune.batch_ms),
                MAX_LONGEST_TRANSACTION,
            ),
            (
                "prune's longest transaction",
                ratio(stage.prune.longest_ms, baseline.prune.longest_ms),
                MAX_LONGEST_TRANSACTION,
            ),
        ):
            verdict = "reached" if value <= reach else "NOT reached"
            lines.append(
                f"{stage.label}: {what} {times(value)} the baseline's (reach ≤ {times(reach)}): {verdict}"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        required=True,
        help="PostgreSQL URL of a scratch database (its public schema is dropped)",
    )
    parser.add_argument("--rows", type=int, default=ROWS, help="the grown log's rows (default %(default)s)")
    args = parser.parse_args()
    if not args.database_url.startswith("postgresql"):
        raise BenchError("partitioning is PostgreSQL's: give a postgresql:// --database-url")
    with scratch_directory() as folder:
        db = Database(Settings(data_dir=folder, database_url=args.database_url).resolved_database_url)
        try:
            stages, partitioned_s, dropped = run_stages(db, args.rows)
        finally:
            db.dispose()
    print(
        f"The notification log at {BASELINE_ROWS:,} (baseline) and {args.rows:,} rows over {DAYS} days, "
        f"then partitioned by month; PostgreSQL; first page: median and p99 of {RUNS} runs of the "
        f"route's function (ms), unfiltered and one channel's `sent` of 7 days; prune: the oldest "
        f"{PRUNED_DAYS} days in batches of {BATCH:,}:\n"
    )
    headers = ["stage", "rows", "page p50", "page p99", "p50 xbase"]
    headers += [
        "filtered p50",
        "filtered p99",
        "filtered xbase",
        "pruned",
        "prune s",
        "batch ms",
        "batch xbase",
        "longest tx ms",
        "longest xbase",
    ]
    print(format_table(headers, stage_rows(stages)))
    print(
        f"\nPartitioning {stages[1].rows - stages[1].prune.rows:,} rows (one transaction): {partitioned_s:.1f} s"
    )
    print(
        f"Dropping the oldest month ({dropped.month:%Y-%m}, {dropped.rows:,} rows: detach, drop, its counts): "
        f"{dropped.seconds * 1000:.0f} ms\n"
    )
    print("\n".join(verdicts(stages)))
    return 0


def run_stages(db: Database, rows: int) -> tuple[list[Stage], float, Drop]:
    fresh_schema(db)
    log = create_log(db, utcnow())
    cutoffs = iter(log.now - timedelta(days=DAYS - PRUNED_DAYS * step) for step in (1, 1, 2))
    stages = []

    def grown(label: str, count: int) -> None:
        seconds = seed(db, log, count)
        print(f"Seeded {count:,} attempts in {seconds:.1f} s", file=sys.stderr, flush=True)
        stages.append(measure_stage(db, log, label, next(cutoffs)))

    grown("baseline", BASELINE_ROWS)
    check("seeded", stages[0].rows, BASELINE_ROWS)
    grown("grown", rows - count_logs(db, log.org_id))
    check("grown", stages[1].rows, rows)
    partitioned_s = partition(db, log)
    stages.append(measure_stage(db, log, "partitioned", next(cutoffs)))
    return stages, partitioned_s, drop_oldest_month(db, log)


if __name__ == "__main__":
    run(main)
