"""Processes a test starts on this host: a free port for them, and `python -m service serve` as a
process of its own (for what only a separate process shows: its log lines, its exports, its exit)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def fresh_python_prints(program: str) -> list[str]:
    """The lines a fresh interpreter prints running `program` in the repository: what a process
    of ours loads as it starts."""
    answer = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return answer.stdout.splitlines()


@contextmanager
def http_peer(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A plain HTTP server of `handler` on a free loopback port, in a thread, until the block ends:
    the outside world a test talks to (a proxy, a receiver, a provider)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A port nothing on this host listens on now (for a server to start, or a call to be refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Wait for a process we started to answer 200 at `url`; fail early if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args!r} exited with {process.returncode}")
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not come up in {timeout} s")


@contextmanager
def serving(env: Mapping[str, str], *, log: Path | None = None) -> Iterator[str]:
    """`python -m service serve` with exactly `env`, on a free port, until the block ends: its
    API's base URL. Its standard error (the log) goes to `log` when given."""
    port = free_port()
    with open(log or "/dev/null", "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            cwd=ROOT,
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        base = f"http://127.0.0.1:{port}/api"
        try:
            wait_until_up(base + "/health/live", process)
            yield base
        finally:
            process.terminate()
            process.wait(timeout=30)
