"""The service's instruments, counted where things happen, exposed at /metrics (service/system/
metrics.py adds what is read from the database at scrape time).

With PROMETHEUS_MULTIPROC_DIR set before the process starts, prometheus-client keeps these values
in files of that directory, and a scrape of any process sums every process's (several `serve`
processes on one host).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

# A `_created` series beside every series doubles what each scrape carries, for a value nobody graphs.
disable_created_metrics()

# Latency buckets for an API whose cheap reads take a millisecond and whose writes tens of them.
REQUEST_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

HTTP_REQUESTS = Counter(
    "orgdeck_http_requests",
    "Requests answered, by route template, method and status.",
    ("route", "method", "status"),
)
HTTP_REQUEST_SECONDS = Histogram(
    "orgdeck_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer, by route template and method.",
    ("route", "method"),
    buckets=REQUEST_SECONDS_BUCKETS,
)
WORKER_ROUNDS = Counter(
    "orgdeck_worker_rounds", "Rounds of the worker over its tasks; busy when any task found work.", ("busy",)
)
LEASE_TAKEOVERS = Counter(
    "orgdeck_lease_takeovers",
    "Work taken over from a worker whose lease expired (it stopped or hung), by kind.",
    ("kind",),
)
DELIVERY_ATTEMPTS = Counter(
    "orgdeck_delivery_attempts",
    "Notification delivery attempts, by outcome (sent, failed, dead) and channel kind.",
    ("outcome", "channel_kind"),
)
DEPLOYMENT_JOBS_ENDED = Counter(
    "orgdeck_deployment_jobs_ended", "Deployment jobs that ended, by final state.", ("state",)
)
RETENTION_PRUNED = Counter("orgdeck_retention_pruned_rows", "Rows deleted by retention, by kind.", ("kind",))
RETENTION_HELD_AUDIT_EVENTS = Gauge(
    "orgdeck_retention_unexported_audit_events",
    "Audit events past their retention that no export covers yet, so they are kept (as last counted).",
    multiprocess_mode="max",
)
