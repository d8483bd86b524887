"""Traces with OpenTelemetry, off unless the standard OTEL_* variables ask for them.

On when OTEL_EXPORTER_OTLP_ENDPOINT (or its _TRACES_ form) or OTEL_TRACES_EXPORTER (`otlp`,
`console`) is set, and OTEL_SDK_DISABLED is not `true`; everything else the SDK and the OTLP
exporter read from OTEL_* themselves (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, headers,
sampling). Requests (FastAPI), SQL statements (SQLAlchemy) and outbound calls (httpx, which also
sends the trace on to webhook receivers) are spans.

A deployment job and an event keep the W3C traceparent of what created them (`trace_context`), so
a job's run and an event's deliveries, in a worker minutes later, are spans of the request's trace.
Off, the API's default tracer makes every span a no-op and `current_traceparent` None.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER = trace.get_tracer("orgdeck")
_PROPAGATOR = TraceContextTextMapPropagator()
_configured = False


def enabled() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER")
    if exporter is not None:
        return exporter.strip().lower() not in {"", "none"}
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure() -> bool:
    """Install the SDK's tracer provider and the httpx instrumentation, once per process, when
    tracing is on; whether it is."""
    global _configured
    if not enabled():
        return False
    if _configured:
        return True
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", "orgdeck")})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_exporter()))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument()
    _configured = True
    return True


def _exporter() -> Any:
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def instrument_app(app: Any, *, excluded_paths: str) -> None:
    """Spans for the app's requests (`excluded_paths`: comma-separated, e.g. probes and scrapes)."""
    if configure():
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls=excluded_paths)


def instrument_engine(engine: Any) -> None:
    if configure():
        from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

        # The instrumentation declares SQLAlchemy below 2.1 and would skip 2.1 silently; the event
        # hooks it attaches are the same in 2.1, which tests/test_traces.py checks.
        SQLAlchemyInstrumentor().instrument(engine=engine, skip_dep_check=True)


def name_request_span(method: str, route: str) -> None:
    """Name the request's server span after its route's template (`GET /api/agents/{stableKey}`):
    the instrumentation cannot see through the API's route index, and would say only `GET`."""
    span = trace.get_current_span()
    if span.is_recording():
        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)


def current_traceparent() -> str | None:
    """The W3C traceparent of the span in progress, to keep with what it creates; None when none."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def continued(name: str, traceparent: str | None, **attributes: Any) -> Iterator[None]:
    """A span of the trace `traceparent` names (a new trace without one)."""
    parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    with TRACER.start_as_current_span(name, context=parent, attributes=attributes):
        yield
