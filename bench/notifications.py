"""The notification log at 2,000,000 rows; delivery throughput with one and two workers; and a
healthy endpoint's delivery time next to ten that never answer.

    .venv/bin/python bench/notifications.py                 # fresh SQLite, six to nine minutes
    .venv/bin/python -m bench.notifications --database-url postgresql://postgres@127.0.0.1:5432/bench

Seeds 2,000,000 delivery log rows over 28 days into one organization at the database level (one
transaction, executemany on SQLite, COPY on PostgreSQL; the log's triggers keep its hourly counts
as they would for any writer), spread over three channels and the three outcomes, so that one
channel's `sent` attempts of any 7 days number well over 100,000. Then measures, next to the authenticated
baseline GET /api/api-keys?orgSlug=, GET /api/notifications/logs filtered by channel + status + a
7-day range: the first page, the page at offset 100,000, and the same depth reached by nextCursor.
The reach: the first page's median at most 2x the baseline's, the offset-100,000 page's p99 at
most 1.5x the first page's.

Then delivery throughput: pending deliveries to a receiver on loopback, sent by one
`python -m service worker` process and then by two, against the same database. The reach: one
worker at least 1,000 deliveries a second.

Then isolation: eleven channels subscribed to the same events, ten of them pointing at endpoints
that accept connections and never answer, one at the receiver; once the worker has delivered a
first event (so that its start-up is no event's delay), events are recorded at a steady rate and
it delivers them. The reach: the healthy channel's p99 from event to receipt at
most 1 s, while the ten hold their slots until the delivery timeout (15 s) and retry.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import uvicorn
from sqlalchemy import func, insert, select

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.events import EVENT_TYPES
from bench.common import (
    REPO_ROOT,
    BenchError,
    OrgdeckService,
    OrgKey,
    Series,
    Target,
    add_arguments,
    describe_setup,
    format_table,
    load_settings,
    measure,
    orgdeck_service,
    ratio,
    run,
    scratch_directory,
    times,
)
from service.events.models import EventRow
from service.notifications.models import (
    DeliveryLogCountRow,
    DeliveryLogDayCountRow,
    DeliveryLogRow,
    DeliveryRow,
)
from service.orgs.models import OrganizationRow
from service.settings import Settings
from service.storage.db import Database, utcnow
from service.storage.ids import new_id

LOG_ROWS = 2_000_000
LOG_DAYS = 28
CHANNELS = 3
# Outcome shares: most attempts succeed; the measured filter is one channel's `sent` attempts.
OUTCOMES = {"sent": 0.8, "failed": 0.15, "dead": 0.05}
SEED_BATCH = 20_000
RETRY_DELAY = timedelta(minutes=5)
WINDOW = timedelta(days=7)
# Distinct 7-day windows (an hour apart) each target cycles through, so no one query stays hot.
WINDOWS = 24
DEEP_OFFSET = 100_000
PAGE_SIZE = 50
MAX_FIRST_PAGE_MEDIAN = 2.0
MAX_DEEP_PAGE_P99 = 1.5
DELIVERIES = 10_000
WORKER_COUNTS = (1, 2)
DELIVERY_TIMEOUT_SECONDS = 300
MIN_DELIVERIES_PER_SECOND = 1_000
# Long enough for a worker process to start, migrate and go idle before the deliveries arrive.
WORKER_START_SECONDS = 4
HANGING_ENDPOINTS = 10
EVENTS_PER_SECOND = 20
ISOLATION_SECONDS = 40
MAX_HEALTHY_P99_SECONDS = 1.0


# --- Seeding -----------------------------------------------------------------------------------


def open_database(service: OrgdeckService) -> Database:
    """The service's own database, opened from the settings its process was started with."""
    settings = Settings(
        data_dir=Path(service.env["ORGDECK_DATA_DIR"]), database_url=service.env.get("ORGDECK_DATABASE_URL")
    )
    return Database(settings.resolved_database_url)


def org_id_of(db: Database, slug: str) -> str:
    with db.session() as session:
        found = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == slug))
    if found is None:
        raise BenchError(f"organization {slug} not found in the service's database")
    return found


def create_channels(base_url: str, org: OrgKey, url: str, count: int, name: str) -> list[str]:
    """Webhook channels made through the API (so they are real rows with real secrets)."""
    ids = []
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=60) as http:
        for index in range(count):
            body = {"orgSlug": org.slug, "name": f"{name} {index}", "kind": "webhook", "config": {"url": url}}
            answer = http.post("/api/notifications/channels", json=body)
            answer.raise_for_status()
            ids.append(answer.json()["id"])
    return ids


def log_rows(org_id: str, channel_ids: Sequence[str], now: datetime) -> Iterator[list[dict[str, Any]]]:
    """LOG_ROWS attempts, oldest first and about 1.2 s apart over LOG_DAYS days, in batches."""
    rng = random.Random(2026)
    step = LOG_DAYS * 86_400 / LOG_ROWS
    start = now.timestamp() - LOG_DAYS * 86_400
    # Time-ordered ids of the real shape: this run's id prefix (its time) and a counter. One new_id
    # per row would take longer than the insert itself.
    prefix = new_id("log")[:-16]
    bounds = list(itertools.accumulate(OUTCOMES.values()))
    batch: list[dict[str, Any]] = []
    for index in range(LOG_ROWS):
        created_at = datetime.fromtimestamp(start + step * (index + rng.random()), UTC)
        draw = rng.random()
        status = next((name for name, bound in zip(OUTCOMES, bounds, strict=True) if draw < bound), "sent")
        channel = index % len(channel_ids)
        suffix = f"{index:016d}"
        failed = status != "sent"
        batch.append(
            {
                "id": prefix + suffix,
                "org_id": org_id,
                "delivery_id": "msg" + prefix[3:] + suffix,
                "event_id": "evt" + prefix[3:] + suffix,
                "event_type": EVENT_TYPES[index % len(EVENT_TYPES)],
                "channel_id": channel_ids[channel],
                "channel_name": f"bench channel {channel}",
                "channel_kind": "webhook",
                "attempt": 1 + failed * (index % 8),
                "status": status,
                "response_status": 500 if failed else 200,
                "latency_ms": 5 + index % 400,
                "error": "HTTP 500: upstream unavailable" if failed else None,
                "next_attempt_at": created_at + RETRY_DELAY if status == "failed" else None,
                "created_at": created_at,
            }
        )
        if len(batch) == SEED_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def seed_logs(db: Database, org_id: str, channel_ids: Sequence[str], now: datetime) -> None:
    """Write every log row in one transaction: executemany on SQLite, COPY on PostgreSQL."""
    started = time.monotonic()
    if db.is_sqlite:
        with db.session(write=True) as session:
            connection = session.connection()
            for batch in log_rows(org_id, channel_ids, now):
                connection.execute(insert(DeliveryLogRow), batch)
    else:
        columns = [column.name for column in DeliveryLogRow.__table__.columns]
        raw = db.engine.raw_connection()
        try:
            with raw.cursor() as cursor:
                statement = f"COPY notification_logs ({', '.join(columns)}) FROM STDIN"
                with cursor.copy(statement) as copy:
                    for batch in log_rows(org_id, channel_ids, now):
                        for row in batch:
                            copy.write_row([row.get(name) for name in columns])
            raw.commit()
        finally:
            raw.close()
        # What autovacuum does to tables this size soon after: statistics and the visibility map
        # (without which PostgreSQL cannot read an index alone).
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            for table in (DeliveryLogRow, DeliveryLogCountRow, DeliveryLogDayCountRow):
                connection.exec_driver_sql(f"VACUUM ANALYZE {table.__tablename__}")
    elapsed = time.monotonic() - started
    print(f"Seeded {LOG_ROWS:,} log rows in {elapsed:.1f} s ({LOG_ROWS / elapsed:,.0f}/s)", file=sys.stderr)


# --- The log queries ---------------------------------------------------------------------------


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def log_path(org: OrgKey, channel_id: str, end: datetime, **extra: str | int) -> str:
    """GET /notifications/logs for one channel's `sent` attempts in the 7 days before `end`."""
    query = {
        "orgSlug": org.slug,
        "channelId": channel_id,
        "status": "sent",
        "dateRange[start]": stamp(end - WINDOW),
        "dateRange[end]": stamp(end),
        **{name: str(value) for name, value in extra.items()},
    }
    return "/api/notifications/logs?" + urlencode(query)


@dataclass(frozen=True)
class LogPaths:
    first: list[str]
    deep: list[str]
    cursor: list[str]


def log_paths(base_url: str, org: OrgKey, channel_id: str, now: datetime) -> LogPaths:
    """The paths of each target, one per window; checks every deep page is really there."""
    ends = [now.replace(second=0, microsecond=0) - timedelta(hours=hour) for hour in range(WINDOWS)]
    first = [log_path(org, channel_id, end) for end in ends]
    deep = [log_path(org, channel_id, end, **{"pagination[offset]": DEEP_OFFSET}) for end in ends]
    cursor = []
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=120) as http:
        for end, deep_path in zip(ends, deep, strict=True):
            # The page before the deep one hands out the cursor that continues at the same depth.
            before = http.get(
                log_path(org, channel_id, end, **{"pagination[offset]": DEEP_OFFSET - PAGE_SIZE})
            )
            before.raise_for_status()
            listed = before.json()
            if listed["total"] < DEEP_OFFSET + PAGE_SIZE or not listed["nextCursor"]:
                raise BenchError(f"only {listed['total']:,} matches in the window ending {stamp(end)}")
            cursor_path = log_path(org, channel_id, end, cursor=listed["nextCursor"])
            by_offset, by_cursor = http.get(deep_path).json(), http.get(cursor_path).json()
            if [e["id"] for e in by_offset["items"]] != [e["id"] for e in by_cursor["items"]]:
                raise BenchError("the offset page and the cursor page at the same depth differ")
            cursor.append(cursor_path)
    print(f"Matches per 7-day window: {listed['total']:,} (the last window)", file=sys.stderr)
    return LogPaths(first, deep, cursor)


def log_rows_table(baseline: Series, first: Series, others: Sequence[Series]) -> list[list[str]]:
    return [
        [
            s.label,
            f"{s.requests_per_second:,.0f}",
            f"{s.p50_ms:.2f}",
            f"{s.p99_ms:.2f}",
            times(ratio(s.p50_ms, baseline.p50_ms)),
            times(ratio(s.p99_ms, first.p99_ms)),
        ]
        for s in (baseline, first, *others)
    ]


def log_verdict(baseline: Series, first: Series, deep: Series) -> str:
    first_median = ratio(first.p50_ms, baseline.p50_ms)
    deep_p99 = ratio(deep.p99_ms, first.p99_ms)
    lines = [
        f"First page median {times(first_median)} the baseline's (reach ≤ {times(MAX_FIRST_PAGE_MEDIAN)}): "
        f"{'reached' if first_median <= MAX_FIRST_PAGE_MEDIAN else 'NOT reached'}",
        f"Offset {DEEP_OFFSET:,} p99 {times(deep_p99)} the first page's (reach ≤ {times(MAX_DEEP_PAGE_P99)}): "
        f"{'reached' if deep_p99 <= MAX_DEEP_PAGE_P99 else 'NOT reached'}",
    ]
    return "\n".join(lines)


# --- Delivery throughput -----------------------------------------------------------------------


@dataclass
class Receiver:
    """A receiver on loopback: uvicorn serving a bare ASGI app that answers 204 at once, so the
    figures are the workers' own. It notes, per path, how long after its event each message came."""

    url: str = ""
    delays: dict[str, list[float]] = field(default_factory=dict)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        occurred = datetime.fromisoformat(json.loads(body)["timestamp"])
        self.delays.setdefault(scope["path"], []).append(time.time() - occurred.timestamp())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@contextmanager
def loopback_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    receiver.url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    config = uvicorn.Config(receiver, log_level="warning", access_log=False, lifespan="off", backlog=1024)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield receiver
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()


@contextmanager
def hanging_endpoints(count: int) -> Iterator[list[str]]:
    """`count` endpoints that accept connections, read what comes and never answer."""
    loop = asyncio.new_event_loop()
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(65536):
            pass

    async def listen() -> list[asyncio.Server]:
        return [await asyncio.start_server(hold, "127.0.0.1", 0, backlog=1024) for _ in range(count)]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = asyncio.run_coroutine_threadsafe(listen(), loop).result()
    try:
        yield [f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook" for server in servers]
    finally:
        for server in servers:
            loop.call_soon_threadsafe(server.close)
        for writer in held:
            loop.call_soon_threadsafe(writer.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def queue_deliveries(db: Database, org_id: str, channel_id: str, count: int) -> None:
    """`count` events already fanned out to one channel, each with its pending delivery."""
    now = utcnow()
    events = [
        {
            "id": new_id("evt"),
            "org_id": org_id,
            "type": "deployment.complete",
            "payload": {"jobId": f"job_{index}", "environment": "production"},
            "occurred_at": now,
            "fanned_out_at": now,
        }
        for index in range(count)
    ]
    deliveries = [
        {
            "id": new_id("msg"),
            "org_id": org_id,
            "event_id": event["id"],
            "event_type": event["type"],
            "channel_id": channel_id,
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for event in events
    ]
    with db.session(write=True) as session:
        session.execute(insert(EventRow), events)
        session.execute(insert(DeliveryRow), deliveries)


@dataclass(frozen=True)
class DeliveryRun:
    """`deliveries` sent by `workers`, the first and the last `seconds` apart."""

    workers: int
    deliveries: int
    seconds: float
    cpu_seconds: float

    @property
    def per_second(self) -> float:
        return (self.deliveries - 1) / self.seconds

    @property
    def per_cpu_second(self) -> float:
        """Deliveries per second of the workers' own CPU: what a worker does on a core of its own,
        the figure to trust on a machine shared with other work."""
        return self.deliveries / self.cpu_seconds


def run_workers(service: OrgdeckService, count: int, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    """`python -m service worker` processes on the service's database, settings and key."""
    env = {**service.env, "ORGDECK_OUTBOUND_ALLOW_PRIVATE": "127.0.0.1"}
    processes = []
    for index in range(count):
        with (log_dir / f"worker-{count}-{index}.log").open("wb") as log:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "service", "worker"],
                    cwd=REPO_ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return processes


def stop_all(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure_delivery(
    service: OrgdeckService,
    db: Database,
    org: OrgKey,
    receiver_url: str,
    workers: int,
    count: int,
    log_dir: Path,
) -> DeliveryRun:
    """Start the workers, queue `count` deliveries to one channel and wait until every one is sent.

    The rate is taken between the first and the last recorded attempt, so process start-up and
    the polling of this bench are not in it; the workers' CPU time from the moment the
    deliveries are queued (they are idle by then) to the last one gives the rate per CPU-second.
    """
    (channel_id,) = create_channels(service.origin, org, receiver_url, 1, f"throughput {workers}")
    org_id = org_id_of(db, org.slug)
    pending = (
        select(func.count())
        .select_from(DeliveryRow)
        .where(DeliveryRow.channel_id == channel_id, DeliveryRow.status == "pending")
    )
    processes = run_workers(service, workers, log_dir)
    try:
        time.sleep(WORKER_START_SECONDS)
        cpu_before = sum(cpu_seconds(process.pid) for process in processes)
        queue_deliveries(db, org_id, channel_id, count)
        deadline = time.monotonic() + DELIVERY_TIMEOUT_SECONDS
        while True:
            with db.session() as session:
                if not session.scalar(pending):
                    break
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                logs = "\n".join(
                    path.read_text(errors="replace")[-2000:] for path in log_dir.glob("worker-*")
                )
                raise BenchError(f"{workers} worker(s) did not send {count:,} deliveries:\n{logs}")
            time.sleep(0.2)
        cpu = sum(cpu_seconds(process.pid) for process in processes) - cpu_before
    finally:
        stop_all(processes)
    with db.session() as session:
        sent, first, last = session.execute(
            select(
                func.count(), func.min(DeliveryLogRow.created_at), func.max(DeliveryLogRow.created_at)
            ).where(DeliveryLogRow.channel_id == channel_id, DeliveryLogRow.status == "sent")
        ).one()
    if sent != count:
        raise BenchError(f"{sent:,} of {count:,} deliveries were sent at the first attempt")
    return DeliveryRun(
        workers=workers, deliveries=sent, seconds=(last - first).total_seconds(), cpu_seconds=cpu
    )


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used so far, all threads, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def subscribe(base_url: str, org: OrgKey, channel_ids: Sequence[str], event_type: str) -> None:
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=60) as http:
        for channel_id in channel_ids:
            body = {"orgSlug": org.slug, "channelId": channel_id, "eventType": event_type}
            http.post("/api/notifications/subscriptions/subscribe", json=body).raise_for_status()


@dataclass(frozen=True)
class IsolationRun:
    """The healthy channel's delays from event to receipt, and what the stuck channels logged."""

    delays: list[float]
    events: int
    stuck_attempts: int
    seconds: float

    def percentile(self, share: float) -> float:
        ordered = sorted(self.delays)
        return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure_isolation(
    service: OrgdeckService,
    db: Database,
    org: OrgKey,
    receiver: Receiver,
    hanging: Sequence[str],
    log_dir: Path,
) -> IsolationRun:
    """Events at EVENTS_PER_SECOND for ISOLATION_SECONDS to ten stuck channels and a healthy one,
    one worker sending; the healthy channel's delay of each event, measured at the receiver."""
    stuck = [
        create_channels(service.origin, org, url, 1, f"never answers {n}")[0] for n, url in enumerate(hanging)
    ]
    (healthy,) = create_channels(service.origin, org, receiver.url + "/healthy", 1, "healthy")
    subscribe(service.origin, org, [*stuck, healthy], "deployment.complete")
    org_id = org_id_of(db, org.slug)
    healthy_delays = receiver.delays.setdefault("/healthy", [])
    (worker,) = run_workers(service, 1, log_dir)
    try:
        # One event delivered before the measured ones: the worker's start is not part of any delay.
        record_event(db, org_id, "job_warm_up")
        wait_until_received(healthy_delays, 1, worker)
        healthy_delays.clear()
        events = 0
        started = time.monotonic()
        while time.monotonic() - started < ISOLATION_SECONDS:
            record_event(db, org_id, f"job_{events}")
            events += 1
            time.sleep(max(0.0, started + events / EVENTS_PER_SECOND - time.monotonic()))
        wait_until_received(healthy_delays, events, worker)
        seconds = time.monotonic() - started
    finally:
        stop_all([worker])
    with db.session() as session:
        stuck_attempts = session.scalar(
            select(func.count()).select_from(DeliveryLogRow).where(DeliveryLogRow.channel_id.in_(stuck))
        )
    return IsolationRun(healthy_delays, events, stuck_attempts or 0, seconds)


def record_event(db: Database, org_id: str, job_id: str) -> None:
    with db.session(write=True) as session:
        session.execute(
            insert(EventRow),
            [{"id": new_id("evt"), "org_id": org_id, "type": "deployment.complete",
              "payload": {"jobId": job_id}, "occurred_at": utcnow()}],
        )  # fmt: skip


def wait_until_received(delays: list[float], count: int, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while len(delays) < count:
        if time.monotonic() > deadline or worker.poll() is not None:
            raise BenchError(f"the healthy channel got {len(delays)} of {count}")
        time.sleep(0.05)


def isolation_table(run: IsolationRun) -> str:
    rows = [
        [
            f"{run.events:,}",
            f"{statistics.median(run.delays) * 1000:.0f}",
            f"{run.percentile(0.99) * 1000:.0f}",
            f"{max(run.delays) * 1000:.0f}",
            f"{run.stuck_attempts:,}",
        ]
    ]
    return format_table(
        ["healthy deliveries", "p50 ms", "p99 ms", "max ms", "attempts to the 10 that never answer"], rows
    )


def delivery_verdicts(runs: Sequence[DeliveryRun], isolation: IsolationRun) -> str:
    one = runs[0].per_second
    p99 = isolation.percentile(0.99)
    return "\n".join(
        [
            f"One worker: {one:,.0f} deliveries/s, {runs[0].per_cpu_second:,.0f} per CPU-second "
            f"(reach ≥ {MIN_DELIVERIES_PER_SECOND:,}/s): "
            f"{'reached' if one >= MIN_DELIVERIES_PER_SECOND else 'NOT reached'}",
            f"Healthy channel next to {HANGING_ENDPOINTS} that never answer: p99 {p99:.2f} s from event to "
            f"receipt (reach ≤ {MAX_HEALTHY_P99_SECONDS:g} s): "
            f"{'reached' if p99 <= MAX_HEALTHY_P99_SECONDS else 'NOT reached'}",
        ]
    )


def delivery_table(runs: Sequence[DeliveryRun]) -> str:
    one = runs[0]
    rows = [
        [
            f"{run.workers} worker{'s' if run.workers > 1 else ''}",
            f"{run.deliveries:,}",
            f"{run.seconds:.1f}",
            f"{run.per_second:,.0f}",
            times(ratio(run.per_second, one.per_second)),
            f"{run.cpu_seconds:.1f}",
            f"{run.per_cpu_second:,.0f}",
        ]
        for run in runs
    ]
    headers = ["Workers", "deliveries", "seconds", "deliveries/s", "x 1 worker", "worker CPU s", "per CPU-s"]
    return format_table(headers, rows)


# --- Main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/notifications.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--deliveries",
        type=int,
        default=DELIVERIES,
        help="deliveries per throughput run (default %(default)s)",
    )
    args = parser.parse_args(argv)
    load = load_settings(args)
    setup = describe_setup(load, args.database_url)
    print(f"Notifications: {setup}", file=sys.stderr)
    # Deliveries are the measured workers' job alone.
    env = {"ORGDECK_RUN_WORKER": "false"}
    with (
        scratch_directory() as workdir,
        loopback_receiver() as receiver,
        hanging_endpoints(HANGING_ENDPOINTS) as hanging,
        orgdeck_service(workdir, database_url=args.database_url, env=env) as service,
    ):
        org = service.create_org()
        db = open_database(service)
        try:
            now = utcnow()
            channel_ids = create_channels(service.origin, org, receiver.url + "/logged", CHANNELS, "bench")
            seed_logs(db, org_id_of(db, org.slug), channel_ids, now)
            paths = log_paths(service.origin, org, channel_ids[0], now)
            targets = [
                Target(
                    "GET /api/api-keys?orgSlug= (key)",
                    service,
                    f"/api/api-keys?orgSlug={org.slug}",
                    org.headers,
                ),
                Target("logs: first page", service, paths.first[0], org.headers, paths.first),
                Target(f"logs: offset {DEEP_OFFSET:,}", service, paths.deep[0], org.headers, paths.deep),
                Target(
                    f"logs: nextCursor at {DEEP_OFFSET:,}",
                    service,
                    paths.cursor[0],
                    org.headers,
                    paths.cursor,
                ),
            ]
            series = measure(targets, load)
            runs = [
                measure_delivery(service, db, org, receiver.url + "/hook", workers, args.deliveries, workdir)
                for workers in WORKER_COUNTS
            ]
            isolation = measure_isolation(service, db, org, receiver, hanging, workdir)
        finally:
            db.dispose()
    baseline, first, deep, cursor = series
    print()
    print(
        f"{setup}; {LOG_ROWS:,} log rows over {LOG_DAYS} days; filter: one channel, status=sent, "
        f"7 days; {PAGE_SIZE} rows a page"
    )
    print()
    headers = ["Target", "req/s", "p50 ms", "p99 ms", "p50 / baseline", "p99 / first page"]
    print(format_table(headers, log_rows_table(baseline, first, [deep, cursor])))
    print()
    print(log_verdict(baseline, first, deep))
    print()
    print(
        f"Delivery throughput: {args.deliveries:,} webhook deliveries to a receiver on loopback, "
        "`python -m service worker` processes (not pinned) on the same database; the rate runs from "
        "the first recorded attempt to the last"
    )
    print()
    print(delivery_table(runs))
    print()
    print(
        f"Isolation: {EVENTS_PER_SECOND} events a second for {ISOLATION_SECONDS} s to {HANGING_ENDPOINTS + 1} "
        f"subscribed channels, {HANGING_ENDPOINTS} of them at endpoints that accept and never answer; one "
        "worker with the default slots and timeout; delay from each event to its receipt by the healthy one"
    )
    print()
    print(isolation_table(isolation))
    print()
    print(delivery_verdicts(runs, isolation))
    return 0


if __name__ == "__main__":
    run(main)
