"""What every answered request leaves behind: its count and latency by route template, method and
status (service/observability/metrics.py), its trace span's name (when tracing is on) and, when
access logging is on, its access line.

The route is the template the request matched (`/api/agents/{stableKey}`), never the raw path: a
label per agent would grow without bound. A request no route took is `unmatched`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Mount
from starlette.types import Scope

from service.http.auth import authenticated
from service.observability import logs, metrics, tracing

UNMATCHED = "unmatched"


class RequestObserver:
    def __init__(self, *, plain_routes: Sequence[BaseRoute], log_requests: bool) -> None:
        """`plain_routes`: the app's routes outside the API's index (/metrics, the documents), which
        Starlette does not name in the scope."""
        # Starlette names what a plain route runs as the scope's endpoint (a mount: its app).
        self.plain_templates = {
            id(
                route.app if isinstance(route, Mount) else getattr(route, "endpoint", route)
            ): route.path_format
            for route in plain_routes
        }
        self.log_requests = log_requests
        # Each (route, method, status)'s series, found once: prometheus-client's label lookup costs
        # more than the count itself. Bounded: route templates and statuses are few.
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def answering(self, scope: Scope) -> None:
        # The request's span ends with its answer's last message: named now, while it records.
        tracing.name_request_span(scope["method"], route_template(scope, self.plain_templates))

    def __call__(self, scope: Scope, status: int, seconds: float) -> None:
        route = route_template(scope, self.plain_templates)
        method = scope["method"]
        key = (route, method, status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (
                metrics.HTTP_REQUESTS.labels(route=route, method=method, status=str(status)),
                metrics.HTTP_REQUEST_SECONDS.labels(route=route, method=method),
            )
        series[0].inc()
        series[1].observe(seconds)
        if self.log_requests:
            caller = authenticated(scope).caller
            logs.log_request(
                method=method,
                route=route,
                status=status,
                seconds=seconds,
                org=caller.org_slug if caller else None,
                actor_id=(caller.member_id or caller.key_id) if caller else None,
            )


def route_template(scope: Scope, plain_templates: dict[int, str]) -> str:
    route = scope.get("route")
    if route is not None:
        return route.path_format
    return plain_templates.get(id(scope.get("endpoint")), UNMATCHED)
