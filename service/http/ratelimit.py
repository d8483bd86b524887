"""Fixed-window rate limiting per key (per client address without one), in memory or in Redis."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

logger = logging.getLogger("orgdeck.ratelimit")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> list[tuple[bytes, bytes]]:
        pairs = [
            (b"ratelimit-limit", str(self.limit).encode()),
            (b"ratelimit-remaining", str(self.remaining).encode()),
            (b"ratelimit-reset", str(self.reset_seconds).encode()),
        ]
        if not self.allowed:
            pairs.append((b"retry-after", str(self.reset_seconds).encode()))
        return pairs


class Limiter(Protocol):
    async def hit(self, identity: str) -> Decision: ...


class _Window:
    def __init__(self, limit: int, window_seconds: int) -> None:
        self.limit = limit
        self.window_seconds = window_seconds

    def current(self) -> tuple[int, int]:
        """The current window's number and the whole seconds until it ends (at least 1)."""
        now = time.time()
        number = int(now // self.window_seconds)
        return number, max(1, math.ceil((number + 1) * self.window_seconds - now))

    def decide(self, count: int, reset_seconds: int) -> Decision:
        return Decision(count <= self.limit, self.limit, max(0, self.limit - count), reset_seconds)


class MemoryLimiter(_Window):
    """Budgets of this process only."""

    def __init__(self, limit: int, window_seconds: int) -> None:
        super().__init__(limit, window_seconds)
        self._counts: dict[str, tuple[int, int]] = {}

    async def hit(self, identity: str) -> Decision:
        number, reset = self.current()
        window, count = self._counts.get(identity, (number, 0))
        count = count + 1 if window == number else 1
        if len(self._counts) > 100_000:
            self._counts = {k: v for k, v in self._counts.items() if v[0] == number}
        self._counts[identity] = (number, count)
        return self.decide(count, reset)


class RedisLimiter(_Window):
    """Budgets shared by every process that uses the same Redis. Fails open if Redis is down."""

    def __init__(self, url: str, limit: int, window_seconds: int) -> None:
        super().__init__(limit, window_seconds)
        import redis.asyncio as redis  # imported here: Redis is optional

        self._redis: Any = redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)

    async def hit(self, identity: str) -> Decision:
        number, reset = self.current()
        key = f"orgdeck:ratelimit:{identity}:{number}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, self.window_seconds + 1)
                count, _ = await pipe.execute()
        except Exception as exc:
            logger.warning("Rate limiting skipped: Redis unavailable (%s)", exc)
            return Decision(True, self.limit, self.limit, reset)
        return self.decide(int(count), reset)

    async def close(self) -> None:
        await self._redis.aclose()


def identity_of(credential: str | None, client: tuple[str, int] | None) -> str:
    """The budget a request draws on: a digest of the credential it presents (before anyone looks
    it up, so a flood of made-up keys is limited without touching the database), else its client
    address."""
    if credential:
        return "key:" + hashlib.sha256(credential.encode()).hexdigest()[:32]
    return "addr:" + (client[0] if client else "unknown")
