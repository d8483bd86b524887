"""Traces: off by default; with OTEL_EXPORTER_OTLP_ENDPOINT set, a request, its SQL, the deployment
job it created and the notification that job's end sent are spans of one trace, exported over OTLP
to a collector (here a real one on loopback that keeps what it is sent)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from api import OrgdeckClient
from service.runtime.bootstrap import create_org_with_key
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import scratch_database, service_env, wait_for
from tests.processes import serving
from tests.test_deployments import versioned_agent, wait_for_end

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class Receiver:
    """A loopback HTTP server keeping each POST's path, headers and body."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], bytes]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(trace id, name, attributes) of every span exported so far."""
        found = []
        for path, _, body in list(self.posts):
            if path != "/v1/traces":
                continue
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {
                            a.key: a.value.string_value or a.value.int_value for a in span.attributes
                        }
                        found.append((span.trace_id.hex(), span.name, attributes))
        return found

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def collector() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def own_database(tmp_path) -> Iterator[tuple[str, Database]]:
    """A database of this test's own, migrated: on the suite's shared one, the shared service's
    worker may take the job or the delivery first and run it untraced."""
    folder = tmp_path / "database"
    folder.mkdir()
    with scratch_database(folder) as url:
        db = Database(url)
        upgrade(db)
        try:
            yield url, db
        finally:
            db.dispose()


def traced_service(tmp_path, database_url: str, **extra: str) -> AbstractContextManager[str]:
    """A service process of the test's own, seeing only the OTEL_* settings in `extra`."""
    env = service_env(
        tmp_path,
        database_url,
        ORGDECK_OUTBOUND_ALLOW_PRIVATE="*",
        ORGDECK_NOTIFICATION_POLL_SECONDS="0.05",
        **extra,
    )
    return serving({k: v for k, v in env.items() if not k.startswith("OTEL_") or k in extra})


def test_a_request_its_job_and_its_notification_share_one_trace(tmp_path, own_database, collector, webhook):
    database_url, db = own_database
    slug, key = create_org_with_key(db, slug="traced", name="Traced", key_name="admin")
    with traced_service(
        tmp_path, database_url, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="100"
    ) as url:
        with OrgdeckClient(url, key, org_slug=slug) as client:
            channel = client.notifications.create_channel("Ops hook", "webhook", url=webhook.url + "/hook")
            client.notifications.subscribe(channel.id, "deployment.complete")
            environment = client.environments.create("staging").id
            versioned_agent(client, "alpha")
        with (
            httpx.Client(headers={"traceparent": TRACEPARENT}) as http,
            OrgdeckClient(url, key, org_slug=slug, http_client=http) as traced,
        ):
            job = traced.deployments.deploy(environment, ["alpha"])
        with OrgdeckClient(url, key, org_slug=slug) as client:
            assert wait_for_end(client, job.id).status == "complete"
        delivered = wait_for(lambda: [p for p in webhook.posts if p[0] == "/hook"], what="the notification")
        assert delivered[0][1]["traceparent"].split("-")[1] == TRACE_ID
        assert json.loads(delivered[0][2])["type"] == "deployment.complete"

        def traced_spans() -> set[str] | None:
            names = {name for trace_id, name, _ in collector.spans() if trace_id == TRACE_ID}
            return names if {"deployment job", "notification delivery"} <= names else None

        names = wait_for(traced_spans, timeout=30, what="the job's and the delivery's spans")
        assert "POST /api/agents/deployments" in names, sorted(names)  # the request itself
        assert any(name.lower().startswith(("insert", "select")) for name in names)  # its SQL
        job_spans = [a for t, n, a in collector.spans() if n == "deployment job" and t == TRACE_ID]
        assert job_spans[0]["job_id"] == job.id


def test_without_otel_settings_nothing_is_exported(tmp_path, own_database, collector):
    database_url, db = own_database
    slug, key = create_org_with_key(db, slug="untraced", name="Untraced", key_name="admin")
    # The collector's address is known, but only as a setting no OpenTelemetry reader looks at.
    with (
        traced_service(tmp_path, database_url, ORGDECK_CONSOLE_URL=collector.url) as url,
        httpx.Client(headers={"traceparent": TRACEPARENT}) as http,
        OrgdeckClient(url, key, org_slug=slug, http_client=http) as client,
    ):
        environment = client.environments.create("staging").id
        versioned_agent(client, "alpha")
        job = client.deployments.deploy(environment, ["alpha"])
        assert wait_for_end(client, job.id).status == "complete"
    assert collector.posts == []
