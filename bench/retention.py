"""What retention's pruning costs, and how long it holds a writer up, next to one plain DELETE.

    .venv/bin/python bench/retention.py                  # fresh SQLite, under a minute
    .venv/bin/python -m bench.retention --database-url postgresql://postgres@127.0.0.1:5432/bench

Seeds ROWS notification log attempts older than 30 days and KEPT recent ones, twice: once pruned
the way the worker prunes (statements of 1,000 rows by time-ordered id, each in a transaction of its
own), once by one `DELETE … WHERE id < cutoff` (the baseline). Prints each one's total time and its
longest transaction: the longest a writer of the table waits (SQLite has one writer at a time).
Reach: the batched prune's longest transaction ≤ 1/20 of the single DELETE's, its total ≤ 2x.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import delete, insert, select

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import format_table, ratio, run, scratch_directory
from service.notifications.models import DeliveryLogRow
from service.orgs.models import OrganizationRow
from service.retention.service import KINDS
from service.settings import Settings
from service.storage.db import Database, utcnow
from service.storage.ids import first_id_at, new_id
from service.storage.migrate import upgrade

ROWS = 200_000
KEPT = 20_000
BATCH = 1_000
LOGS = next(kind for kind in KINDS if kind.name == "notification_logs")


def seed(db: Database, org_id: str) -> str:
    """ROWS attempts 31 to 60 days old and KEPT from the last day; the cutoff id of 30 days."""
    now = utcnow()
    moments = [now - timedelta(days=31, seconds=index * 12) for index in range(ROWS)]
    moments += [now - timedelta(seconds=index) for index in range(KEPT)]
    for start in range(0, len(moments), 10_000):
        rows = [
            {
                "id": new_id("log", at=moment),
                "org_id": org_id,
                "delivery_id": "msg_bench",
                "event_id": "evt_bench",
                "event_type": "deployment.succeeded",
                "channel_id": "ch_bench",
                "channel_name": "bench",
                "channel_kind": "webhook",
                "attempt": 1,
                "status": "sent",
                "created_at": moment,
            }
            for moment in moments[start : start + 10_000]
        ]
        with db.session(write=True) as session:
            session.execute(insert(DeliveryLogRow), rows)
    return first_id_at("log", now - timedelta(days=30))


def batched(db: Database, cutoff_id: str) -> tuple[float, float, int]:
    """Total seconds, longest transaction and rows deleted, pruned as the worker does."""
    longest, deleted, began, after = 0.0, 0, time.perf_counter(), ""
    while True:
        started = time.perf_counter()
        with db.session(write=True) as session:
            keys = LOGS.prune_batch(session, cutoff_id, BATCH, after)
        longest = max(longest, time.perf_counter() - started)
        deleted += len(keys)
        if len(keys) < BATCH:
            return time.perf_counter() - began, longest, deleted
        after = max(keys)


def at_once(db: Database, cutoff_id: str) -> tuple[float, float, int]:
    began = time.perf_counter()
    with db.session(write=True) as session:
        count = session.execute(delete(DeliveryLogRow).where(DeliveryLogRow.id < cutoff_id)).rowcount
    took = time.perf_counter() - began
    return took, took, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="PostgreSQL URL of an empty database (default: fresh SQLite)")
    args = parser.parse_args()
    with scratch_directory() as folder:
        settings = Settings(data_dir=folder, database_url=args.database_url)
        db = Database(settings.resolved_database_url)
        upgrade(db)
        with db.session(write=True) as session:
            org = OrganizationRow(slug="bench-retention", name="Bench")
            session.add(org)
            session.flush()
            org_id = org.id
        results = {}
        for name, prune in (("one DELETE (baseline)", at_once), (f"batches of {BATCH:,}", batched)):
            cutoff_id = seed(db, org_id)
            results[name] = prune(db, cutoff_id)
            with db.session() as session:
                left = len(
                    session.scalars(select(DeliveryLogRow.id).where(DeliveryLogRow.org_id == org_id)).all()
                )
            assert results[name][2] == ROWS and left == KEPT, (name, results[name], left)
            with db.session(write=True) as session:
                session.execute(delete(DeliveryLogRow).where(DeliveryLogRow.org_id == org_id))
        db.dispose()
    base_total, base_longest, _ = results["one DELETE (baseline)"]
    rows = [
        [
            name,
            f"{total:.2f} s",
            f"{longest * 1000:.1f} ms",
            f"{ratio(total, base_total):.2f}x",
            f"{ratio(longest, base_longest):.3f}x",
        ]
        for name, (total, longest, _) in results.items()
    ]
    database = "PostgreSQL" if args.database_url else "SQLite"
    print(f"Pruning {ROWS:,} notification log attempts older than 30 days ({KEPT:,} kept), {database}:\n")
    print(
        format_table(
            ["how", "total", "longest transaction", "total vs baseline", "longest vs baseline"], rows
        )
    )
    return 0


if __name__ == "__main__":
    run(main)
