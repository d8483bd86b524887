"""The background worker: runs every area's tasks in a loop (deployment jobs, state checks), and
beside it the notification sender, whose own loop sends many deliveries at once (see
service/notifications/sender.py), so that neither ever waits for the other.

A task is a function `(db, settings) -> bool` that does one bounded unit of work in its own
transactions and says whether it found any, so the loop runs again at once while there is work and
sleeps when there is none. Tasks claim their work atomically (PostgreSQL `FOR UPDATE SKIP LOCKED`;
SQLite serialises writers with `BEGIN IMMEDIATE`) and hold it under a lease, so several workers
never run the same item and an item whose worker died is taken up again when its lease expires.

The worker runs inside `serve` by default (ORGDECK_RUN_WORKER) and alone as `python -m service worker`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.changes.service import expire_change_requests
from service.deployments.runner import run_deployment_jobs
from service.deployments.states import check_due_states
from service.idempotency.service import expire_keys
from service.notifications.sender import Sender
from service.observability import metrics
from service.retention.service import prune
from service.settings import Settings
from service.storage.db import Database

logger = logging.getLogger("orgdeck.worker")

Task = Callable[[Database, Settings], bool]


def registered_tasks() -> list[Task]:
    """Every area's tasks, in the order one round runs them."""
    return [run_deployment_jobs, check_due_states, expire_keys, expire_change_requests, prune]


class Worker:
    def __init__(self, db: Database, settings: Settings, tasks: Sequence[Task] | None = None) -> None:
        self.db = db
        self.settings = settings
        self.tasks = list(registered_tasks() if tasks is None else tasks)
        self.sender = Sender(db, settings)
        self._stop = threading.Event()
        self._last_round_at = time.monotonic()

    def silence(self) -> float:
        """Seconds since the last round ended (readiness: a worker silent too long is stuck)."""
        return time.monotonic() - self._last_round_at

    def run_once(self) -> bool:
        """One round over every task; True when any of them found work."""
        busy = False
        for task in self.tasks:
            try:
                busy = task(self.db, self.settings) or busy
            except Exception:
                # One failing task must not stop the others; it is retried next round.
                logger.exception("Worker task %s failed", getattr(task, "__name__", task))
        self._last_round_at = time.monotonic()
        metrics.WORKER_ROUNDS.labels(busy=str(busy).lower()).inc()
        return busy

    def run(self, *, first_round_after: float = 0) -> None:
        """Run the tasks and the sender until `stop`, from `first_round_after` seconds on."""
        if self._stop.wait(first_round_after):
            return
        sender = threading.Thread(target=self._send, name="orgdeck-notifications", daemon=True)
        sender.start()
        try:
            while not self._stop.is_set():
                if not self.run_once():
                    self._stop.wait(self.settings.worker_idle_seconds)
        finally:
            self.sender.stop()
            sender.join()

    def _send(self) -> None:
        """The sender's loop, started again after a pause should it ever fail."""
        while not self._stop.is_set():
            try:
                self.sender.run()
            except Exception:
                logger.exception("The notification sender failed; starting it again")
                self._stop.wait(self.settings.worker_idle_seconds)

    def stop(self) -> None:
        self._stop.set()
        self.sender.stop()


@dataclass(frozen=True)
class WorkerThread:
    """A worker running in a thread of this process (the served app's, the embedded demo's)."""

    worker: Worker
    thread: threading.Thread

    def stop(self, timeout: float = 30) -> None:
        self.worker.stop()
        self.thread.join(timeout)


def start_in_thread(db: Database, settings: Settings, *, first_round_after: float = 0) -> WorkerThread:
    worker = Worker(db, settings)
    thread = threading.Thread(
        target=worker.run,
        kwargs={"first_round_after": first_round_after},
        name="orgdeck-worker",
        daemon=True,
    )
    thread.start()
    return WorkerThread(worker, thread)
