"""The service's health as load balancers and orchestrators ask for it.

Liveness answers without any I/O (the process is up and its event loop turns). Readiness and the
plain health check touch the database, at most once a second however hard they are polled:
readiness asks whether the database answers, whether its schema is at this code's migrations'
head, and, when the worker runs in this process, whether it finished a round recently.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from service.storage.db import Database
from service.storage.migrate import Standing, schema_state

CHECK_INTERVAL_SECONDS = 1.0
# A worker round runs each task once; the longest, a deployment to a slow webhook, is bounded by
# its timeouts well below this. A worker silent for longer is stuck or dead.
WORKER_SILENCE_SECONDS = 120.0


@dataclass(frozen=True)
class DatabaseState:
    reachable: bool
    # Standing.value, or "unknown" when the database did not answer.
    migrations: str


UNREACHABLE = DatabaseState(reachable=False, migrations="unknown")


class HealthCheck:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._worker_silence: Callable[[], float] | None = None
        self._checked_at = float("-inf")
        self._state = UNREACHABLE
        self._lock = asyncio.Lock()

    def attach_worker(self, worker_silence: Callable[[], float] | None) -> None:
        """`worker_silence`: seconds since the in-process worker's last round."""
        self._worker_silence = worker_silence

    async def database_reachable(self) -> bool:
        return (await self.database_state()).reachable

    async def database_state(self) -> DatabaseState:
        """The latest check's result, renewed when older than the interval.

        One caller renews it; the others answer with the previous result meanwhile rather than
        queue behind a check that can wait milliseconds for a thread. Only the first check, with
        nothing to answer before it, is awaited by everyone.
        """
        stale = time.monotonic() - self._checked_at >= CHECK_INTERVAL_SECONDS
        if stale and (not self._lock.locked() or self._checked_at == float("-inf")):
            async with self._lock:
                if time.monotonic() - self._checked_at >= CHECK_INTERVAL_SECONDS:
                    self._state = await run_in_threadpool(self._check)
                    self._checked_at = time.monotonic()
        return self._state

    def _check(self) -> DatabaseState:
        # Reading the schema's revision is the round trip that proves the database answers.
        if self._db.file_gone():
            return UNREACHABLE
        try:
            standing = schema_state(self._db).standing
        except Exception:
            return UNREACHABLE
        return DatabaseState(reachable=True, migrations=standing.value)

    def worker_state(self) -> str:
        """`ok`, `stale`, or `not running` (in another process, or turned off)."""
        if self._worker_silence is None:
            return "not running"
        return "ok" if self._worker_silence() < WORKER_SILENCE_SECONDS else "stale"

    async def readiness(self) -> dict[str, str]:
        """Each check's state; ready when every one is `ok` (or the worker runs elsewhere)."""
        database = await self.database_state()
        return {
            "database": "ok" if database.reachable else "unreachable",
            "migrations": "ok" if database.migrations == Standing.AT_HEAD.value else database.migrations,
            "worker": self.worker_state(),
        }


def is_ready(checks: dict[str, str]) -> bool:
    return all(state in {"ok", "not running"} for state in checks.values())
