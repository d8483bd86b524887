"""What roles and the audit trail cost, and the audit trail's first page at 1,000,000 events.

    .venv/bin/python bench/audit.py                  # fresh SQLite, about four minutes
    .venv/bin/python -m bench.audit --database-url postgresql://postgres@127.0.0.1:5432/bench

1. The cost of the role check and of the audit write, in this process on one core, with the app
   driven directly through ASGI (no network, so the figure is the service's own work): the
   authenticated read GET /api/api-keys with its key resolved and its role checked as every
   request is, against the same app with the role check taken out; and a write (PATCH of an agent's
   name, a new name each time so each request changes something and is audited) against the same
   app with the audit write taken out. Reaches: ≤ 10 % on the read, ≤ 20 % on the write.
2. Seeds 1,000,000 audit events (executemany on SQLite, COPY on PostgreSQL) and measures with wrk
   the trail's first page (50 newest) and its first page of one action, next to the baseline
   GET /api/api-keys?orgSlug=. Reach: the first page's median ≤ 2x the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from sqlalchemy import insert

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    SERIES_HEADERS,
    BenchError,
    OrgdeckService,
    OrgKey,
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
    series_rows,
)
from bench.deployments import copy_rows
from bench.notifications import open_database, org_id_of
from service.storage.db import utcnow
from service.storage.ids import new_id
from service.trail.models import AuditEventRow

EVENTS = 1_000_000
DAYS = 365
BATCH = 20_000
ACTIONS = (
    "createAgent",
    "updateAgent",
    "createAgentVersion",
    "deploy",
    "setSecret",
    "moveLabel",
    "updatePolicy",
)
REQUESTS = 3000
MAX_READ_OVERHEAD = 0.10
MAX_WRITE_OVERHEAD = 0.20
MAX_FIRST_PAGE = 2.0


def event_batches(org_id: str, events: int) -> Iterator[list[dict[str, Any]]]:
    """`events` events, oldest first over DAYS days, by a few people and keys."""
    rng = random.Random(2026)
    now = utcnow()
    step = DAYS * 86_400 / events
    batch: list[dict[str, Any]] = []
    for index in range(events):
        at = now - timedelta(seconds=(events - index) * step)
        member = rng.randrange(12)
        batch.append(
            {
                "id": new_id("aud", at=at),
                "org_id": org_id,
                "occurred_at": at,
                "actor_key_id": f"key_{member:026d}",
                "actor_key_name": f"laptop-{member}",
                "actor_member_id": f"mem_{member:026d}",
                "actor_member_email": f"person{member}@example.com",
                "action": rng.choice(ACTIONS),
                "target_type": "agent",
                "target_id": f"agent-{rng.randrange(200):03d}",
                "target_name": "an agent",
                "request_id": new_id("req", at=at),
                "changes": {"name": f"name {index}"},
            }
        )
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def seed(service: OrgdeckService, org: OrgKey, events: int) -> None:
    db = open_database(service)
    try:
        org_id = org_id_of(db, org.slug)
        started = time.monotonic()
        batches = event_batches(org_id, events)
        if db.is_sqlite:
            with db.session(write=True) as session:
                for batch in batches:
                    session.execute(insert(AuditEventRow), batch)
        else:
            copy_rows(db, ({"audit_events": batch} for batch in batches), {"audit_events": AuditEventRow})
        print(f"Seeded {events:,} audit events in {time.monotonic() - started:.1f} s", file=sys.stderr)
    finally:
        db.dispose()


# --- the cost of the role check and of the audit write, in this process ------------------------


def microseconds_per_request(app: Any, requests: Callable[[int], dict[str, Any]], count: int) -> float:
    """CPU time per request of `app` driven through ASGI, after a warm-up."""

    async def drive() -> float:
        async with app.router.lifespan_context(app):
            for index in range(200):
                await _call(app, requests(index))
            started = time.process_time()
            for index in range(200, 200 + count):
                await _call(app, requests(index))
            return (time.process_time() - started) / count * 1e6

    return asyncio.run(drive())


async def _call(app: Any, request: dict[str, Any]) -> None:
    sent: list[dict[str, Any]] = []
    body = request.pop("body", b"")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http", "root_path": "",
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), **request,
    }  # fmt: skip
    await app(scope, receive, send)
    if sent[0]["status"] != 200:
        raise BenchError(
            f"{request['method']} {request['path']}: {sent[0]['status']} {sent[1].get('body', b'')[:300]!r}"
        )


@contextmanager
def without(target: str, replacement: Any) -> Iterator[None]:
    with mock.patch(target, replacement):
        yield


def overheads(service: OrgdeckService, org: OrgKey) -> list[list[str]]:
    from service.app import create_app
    from service.settings import Settings

    settings = Settings(
        data_dir=Path(service.env["ORGDECK_DATA_DIR"]),
        database_url=service.env.get("ORGDECK_DATABASE_URL"),
        rate_limit=0,
        run_worker=False,
    )
    headers = [
        (b"x-api-key", org.api_key.encode()),
        (b"host", b"bench"),
        (b"content-type", b"application/json"),
    ]
    import httpx

    httpx.post(
        service.url("/api/agents"),
        json={"orgSlug": org.slug, "stableKey": "audited", "provider": "openai"},
        headers=org.headers,
    ).raise_for_status()

    def read(_index: int) -> dict[str, Any]:
        return {"method": "GET", "path": "/api/api-keys", "raw_path": b"/api/api-keys",
                "query_string": f"orgSlug={org.slug}".encode(), "headers": headers}  # fmt: skip

    def write(index: int) -> dict[str, Any]:
        body = f'{{"orgSlug": "{org.slug}", "name": "Audited {index}"}}'.encode()
        return {"method": "PATCH", "path": "/api/agents/audited", "raw_path": b"/api/agents/audited",
                "query_string": b"", "headers": headers, "body": body}  # fmt: skip

    def timed(requests: Callable[[int], dict[str, Any]]) -> float:
        return microseconds_per_request(create_app(settings), requests, REQUESTS)

    read_with = timed(read)
    with without("service.http.deps.role_at_least", lambda _held, _needed: True):
        read_without = timed(read)
    write_with = timed(write)
    with without("service.http.routing.record", lambda *_args, **_kwargs: None):
        write_without = timed(write)
    rows = []
    for label, with_it, without_it, reach in (
        ("read: role check (GET /api/api-keys)", read_with, read_without, MAX_READ_OVERHEAD),
        ("write: audit event (PATCH /api/agents/…)", write_with, write_without, MAX_WRITE_OVERHEAD),
    ):
        overhead = with_it / without_it - 1
        rows.append([label, f"{without_it:,.0f}", f"{with_it:,.0f}", f"{overhead:+.1%}", f"≤ {reach:.0%}",
                     "reached" if overhead <= reach else "NOT reached"])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/audit.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument(
        "--events", type=int, default=EVENTS, help="audit events to seed (default %(default)s)"
    )
    args = parser.parse_args(argv)
    load = load_settings(args)
    print(f"Roles and audit: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with scratch_directory() as workdir, orgdeck_service(workdir, database_url=args.database_url) as service:
        org = service.create_org()
        costs = overheads(service, org)
        seed(service, org, args.events)
        trail = f"/api/audit-events?orgSlug={org.slug}&limit=50"
        targets = [
            Target(
                "GET /api/api-keys?orgSlug= (key)", service, f"/api/api-keys?orgSlug={org.slug}", org.headers
            ),
            Target("audit trail: first page", service, trail, org.headers),
            Target("audit trail: first page of one action", service, f"{trail}&action=deploy", org.headers),
        ]
        series = measure(targets, load)
    print()
    print("The cost of the role check and of the audit write (CPU per request, this process, one core):")
    print()
    print(format_table(["Request", "without µs", "with µs", "overhead", "reach", ""], costs))
    print()
    print(f"{describe_setup(load, args.database_url)}; {args.events:,} audit events over {DAYS} days")
    print()
    print(format_table([*SERIES_HEADERS, "p50 / baseline"], [
        [*row, f"{ratio(s.p50_ms, series[0].p50_ms):.2f}x"] for row, s in zip(series_rows(series), series, strict=True)
    ]))  # fmt: skip
    first = ratio(series[1].p50_ms, series[0].p50_ms)
    print()
    print(f"First page median {first:.2f}x the baseline's (reach ≤ {MAX_FIRST_PAGE}x): "
          f"{'reached' if first <= MAX_FIRST_PAGE else 'NOT reached'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    run(main)
