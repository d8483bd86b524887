"""What observing a request costs: its count, its latency histogram and its span's name (the
edge's RequestObserver), against the whole of the cheapest request it observes, in one run.

    .venv/bin/python bench/observation.py

Both are timed in this process on one core, with no network: GET /api/health/live through the
whole app (every middleware, the route, the JSON answer), called as a server calls it, and the
observer's two calls for one request alone. Prints microseconds per request and the observer's
share, without and with the access line (made into a record; a handler that drops it, so writing
it out is not counted).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi.routing import APIRoute

from bench.common import run
from service.app import create_app
from service.http.observation import RequestObserver
from service.settings import Settings

REQUESTS = 5_000
CALLS = 100_000


async def app_microseconds(data_dir: Path) -> float:
    """One request's time through the app, called as a server calls it (no client, no socket)."""
    app = create_app(Settings(data_dir=data_dir, run_worker=False, rate_limit=0))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/health/live",
        "raw_path": b"/api/health/live",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"bench")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    statuses: list[int] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])  # type: ignore[arg-type]

    async def one() -> None:
        await app(dict(scope), receive, send)

    for _ in range(200):  # warm up
        await one()
    started = time.perf_counter()
    for _ in range(REQUESTS):
        await one()
    elapsed = time.perf_counter() - started
    app.state.db.dispose()
    if set(statuses) != {200}:
        raise SystemExit(f"GET /api/health/live answered {sorted(set(statuses))}")
    return elapsed / REQUESTS * 1e6


def observer_microseconds(*, log_requests: bool) -> float:
    observer = RequestObserver(plain_routes=[], log_requests=log_requests)
    scope = {"route": APIRoute("/api/health/live", lambda: None), "method": "GET", "path": "/api/health/live"}
    started = time.perf_counter()
    for _ in range(CALLS):
        observer.answering(scope)
        observer(scope, 200, 0.001)
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> int:
    logging.getLogger("orgdeck.access").addHandler(logging.NullHandler())
    logging.getLogger("orgdeck.access").propagate = False
    with tempfile.TemporaryDirectory() as workdir:
        whole = asyncio.run(app_microseconds(Path(workdir)))
    counted = observer_microseconds(log_requests=False)
    logged = observer_microseconds(log_requests=True)
    print(f"GET /api/health/live through the whole app, in process: {whole:.1f} µs per request")
    print(
        f"observing it (count, histogram, span name): {counted:.2f} µs, {counted / whole:.1%} of the request"
    )
    print(f"observing it with the access line: {logged:.2f} µs, {logged / whole:.1%} of the request")
    return 0


if __name__ == "__main__":
    run(main)
