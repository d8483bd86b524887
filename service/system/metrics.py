"""GET /metrics: the service's instruments (service/observability/metrics.py) and what is read from
the database when Prometheus scrapes: deployment jobs and notification deliveries by state, their
queues' depth and oldest due age, and this process's database pool.

The database's figures come from a handful of aggregates over the states still in motion, each
answered by an index (jobs by status, deliveries by status and due time), so a scrape costs the
same with ten rows or ten million; ended jobs and finished deliveries are counted as they end
instead (orgdeck_deployment_jobs_ended_total, orgdeck_delivery_attempts_total).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from sqlalchemy import Select, func, select
from sqlalchemy.pool import QueuePool
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from service.deployments.models import DeploymentJobRow
from service.http.auth import Authenticated, authenticated
from service.notifications.models import DeliveryRow
from service.notifications.queue import DUE_STATUSES
from service.storage.db import Database, utcnow

PATH = "/metrics"
JOB_STATES_IN_MOTION = ("pending", "running")
# Deliveries waiting: due (pending, failed and due again) or held while their channel is disabled.
DELIVERY_STATES_WAITING = (*DUE_STATUSES, "held")


class DatabaseCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        now = utcnow()
        jobs = GaugeMetricFamily(
            "orgdeck_deployment_jobs", "Deployment jobs not yet ended, by state.", labels=("state",)
        )
        deliveries = GaugeMetricFamily(
            "orgdeck_deliveries", "Notification deliveries not yet done, by state.", labels=("state",)
        )
        with self.db.engine.connect() as connection:
            job_counts = dict(
                connection.execute(_count_by_status(DeploymentJobRow, JOB_STATES_IN_MOTION)).all()
            )
            delivery_counts = dict(
                connection.execute(_count_by_status(DeliveryRow, DELIVERY_STATES_WAITING)).all()
            )
            oldest_pending_job = connection.execute(
                select(func.min(DeploymentJobRow.created_at)).where(DeploymentJobRow.status == "pending")
            ).scalar()
            due = DeliveryRow.status.in_(DUE_STATUSES), DeliveryRow.next_attempt_at <= now
            due_count, oldest_due = connection.execute(
                select(func.count(), func.min(DeliveryRow.next_attempt_at)).where(*due)
            ).one()
        for state in JOB_STATES_IN_MOTION:
            jobs.add_metric([state], job_counts.get(state, 0))
        for state in DELIVERY_STATES_WAITING:
            deliveries.add_metric([state], delivery_counts.get(state, 0))
        yield jobs
        yield deliveries
        yield GaugeMetricFamily(
            "orgdeck_deployment_queue_depth",
            "Deployment jobs waiting for a worker.",
            value=job_counts.get("pending", 0),
        )
        yield GaugeMetricFamily(
            "orgdeck_deployment_queue_oldest_age_seconds",
            "How long the oldest deployment job waiting for a worker has waited (0 when none).",
            value=_age(now, oldest_pending_job),
        )
        yield GaugeMetricFamily(
            "orgdeck_delivery_queue_depth",
            "Notification deliveries due now and not yet sent.",
            value=due_count,
        )
        yield GaugeMetricFamily(
            "orgdeck_delivery_queue_oldest_due_age_seconds",
            "How long past its due time the most overdue delivery is (0 when none is due).",
            value=_age(now, oldest_due),
        )
        yield from _pool_metrics(self.db)


def _count_by_status(row: type[DeploymentJobRow] | type[DeliveryRow], states: tuple[str, ...]) -> Select[Any]:
    return select(row.status, func.count()).where(row.status.in_(states)).group_by(row.status)


def _age(now: datetime, since: datetime | None) -> float:
    return max((now - since).total_seconds(), 0.0) if since else 0.0


def _pool_metrics(db: Database) -> Iterator[Metric]:
    pool = db.engine.pool
    if not isinstance(pool, QueuePool):
        return
    connections = GaugeMetricFamily(
        "orgdeck_db_pool_connections",
        "This process's database connections, by state: in use, idle in the pool, overflow beyond its size.",
        labels=("state",),
    )
    connections.add_metric(["in_use"], pool.checkedout())
    connections.add_metric(["idle"], pool.checkedin())
    connections.add_metric(["overflow"], max(pool.overflow(), 0))
    yield connections
    yield GaugeMetricFamily("orgdeck_db_pool_size", "Connections the pool keeps open.", value=pool.size())


class MetricsEndpoint:
    """The /metrics route: the instruments (summed over every process when PROMETHEUS_MULTIPROC_DIR
    is set), then the database's figures; open to whom ORGDECK_METRICS_ACCESS says."""

    def __init__(self, db: Database, access: str) -> None:
        self.access = access
        self.database = CollectorRegistry(auto_describe=False)
        self.database.register(DatabaseCollector(db))

    async def answer(self, request: Request) -> Response:
        self._admit(authenticated(request.scope), request.client.host if request.client else None)
        body = await run_in_threadpool(self._render)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def _admit(self, presented: Authenticated, host: str | None) -> None:
        if self.access == "open" or (self.access == "loopback-or-key" and _is_loopback(host)):
            return
        presented.required()  # 401 without a valid key; any role reads the metrics

    def _render(self) -> bytes:
        return generate_latest(_instruments()) + generate_latest(self.database)


def _instruments() -> CollectorRegistry:
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def _is_loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
