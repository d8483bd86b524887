"""Database reachability for /api/health, checked at most once a second however hard it is polled."""

from __future__ import annotations

import asyncio
import time

from starlette.concurrency import run_in_threadpool

from service.storage.db import Database

CHECK_INTERVAL_SECONDS = 1.0


class HealthCheck:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._checked_at = float("-inf")
        self._reachable = False
        self._lock = asyncio.Lock()

    async def database_reachable(self) -> bool:
        """The latest check's result, renewed when older than the interval.

        One caller renews it; the others answer with the previous result meanwhile rather than
        queue behind a check that can wait milliseconds for a thread. Only the first check, with
        nothing to answer before it, is awaited by everyone.
        """
        stale = time.monotonic() - self._checked_at >= CHECK_INTERVAL_SECONDS
        if stale and (not self._lock.locked() or self._checked_at == float("-inf")):
            async with self._lock:
                if time.monotonic() - self._checked_at >= CHECK_INTERVAL_SECONDS:
                    self._reachable = await run_in_threadpool(self._db.ping)
                    self._checked_at = time.monotonic()
        return self._reachable
