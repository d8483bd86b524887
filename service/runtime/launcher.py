"""The console's embedded service as a process of its own: `python -m service demo`.

The console starts it with its own process (as app.py is imported), so that the service imports,
migrates and seeds the demo on the other core while Streamlit starts and the first page imports;
in one process they would take turns. It ends with the console: when the console stops it, and
when the console's process ends in any way (even killed), since its standard input then closes.

This module imports nothing but the standard library: it runs in the console's process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

# Where `service` is imported from, whatever directory the console was started in (which stays the
# child's, for a relative ORGDECK_DATA_DIR).
SOURCE_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_SECONDS = 120
STOP_TIMEOUT_SECONDS = 15


@dataclass(frozen=True)
class Demo:
    """Where the embedded service answers, and the demo organization's admin key."""

    url: str
    api_key: str


def _child_environment() -> dict[str, str]:
    search_path = [str(SOURCE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(search_path)}


class EmbeddedServiceFailed(RuntimeError):
    """The embedded service ended before it was ready (its output, in the console's terminal, says why)."""


class EmbeddedService:
    """`python -m service demo` as a child process: it prints one JSON line when it is ready."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "service", "demo"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_child_environment(),
            # Ctrl+C in a terminal goes to the console alone, which then stops this process itself.
            start_new_session=True,
        )
        self._ready: Future[Demo] = Future()
        threading.Thread(target=self._read_ready_line, name="orgdeck-embedded-ready", daemon=True).start()

    def _read_ready_line(self) -> None:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            self._ready.set_exception(
                EmbeddedServiceFailed(
                    "The embedded service stopped before it was ready; its output, in the terminal "
                    "where the console runs, says why"
                )
            )
            return
        answer = json.loads(line)
        self._ready.set_result(Demo(url=answer["url"], api_key=answer["apiKey"]))

    def wait(self, timeout: float = READY_TIMEOUT_SECONDS) -> Demo:
        """The service once it is ready (at once when it already is)."""
        try:
            return self._ready.result(timeout)
        except TimeoutError:
            raise EmbeddedServiceFailed(f"The embedded service was not ready after {timeout:.0f} s") from None

    @property
    def ended(self) -> bool:
        return self._process.poll() is not None

    def stop(self) -> None:
        """Ask it to stop (its standard input closes), and make sure it has."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_lock = threading.Lock()
_running: EmbeddedService | None = None


def launch() -> EmbeddedService:
    """The console's embedded service, started on the first call (again if it has ended)."""
    global _running
    with _lock:
        if _running is None or _running.ended:
            _running = EmbeddedService()
        return _running


def stop() -> None:
    global _running
    with _lock:
        if _running is not None:
            _running.stop()
            _running = None
