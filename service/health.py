"""Database reachability for /api/health, checked at most once a second however hard it is polled."""

from __future__ import annotations

import asyncio
import time

from starlette.concurrency import run_in_threadpool

from service.db import Database

CHECK_INTERVAL_SECONDS = 1.0


class HealthCheck:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._checked_at = float("-inf")
        self._reachable = False
        self._lock = asyncio.Lock()

    async def database_reachable(self) -> bool:
        if time.monotonic() - self._checked_at < CHECK_INTERVAL_SECONDS:
            return self._reachable
        async with self._lock:
            if time.monotonic() - self._checked_at >= CHECK_INTERVAL_SECONDS:
                self._reachable = await run_in_threadpool(self._db.ping)
                self._checked_at = time.monotonic()
        return self._reachable
