"""Finding the route of a request: the API's routes indexed by the first segment of their path."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from fastapi.routing import APIRoute
from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

API_PREFIX = "/api"


class RouteIndex(BaseRoute):
    """The API's routes, found through the first segment of the request's path under API_PREFIX.

    FastAPI finds a route of an included router by asking each router in turn, and each of its
    routes in turn, then asks the chosen router again: 40 µs to reach the registries' routes, 90 µs
    the deployments', more than the rest of a small read's framework work. Every route's first
    segment is fixed text (`/api/agents/…`), so the routes that can serve a path are those of its
    first segment, tried in the order given (which decides between `/agents/deployment-jobs` and
    `/agents/{stableKey}`)."""

    def __init__(self, routes: Iterable[APIRoute]) -> None:
        self.routes = list(routes)
        self._by_segment: dict[str, list[APIRoute]] = {}
        for route in self.routes:
            segment = _first_segment(route.path)
            if segment is None or "{" in segment:
                raise ValueError(f"{route.path}: an API path starts with {API_PREFIX}/ and fixed text")
            self._by_segment.setdefault(segment, []).append(route)

    def __iter__(self) -> Iterator[APIRoute]:
        return iter(self.routes)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """The first route that takes the path and method (FULL), else the first that takes the
        path (PARTIAL: its 405 names the methods it takes). Either way scope["route"] is the route."""
        if scope["type"] != "http":
            return Match.NONE, {}
        partial: Scope | None = None
        for route in self._by_segment.get(_first_segment(_route_path(scope)), ()):
            match, child_scope = route.matches(scope)
            if match == Match.FULL:
                return match, child_scope
            if match == Match.PARTIAL and partial is None:
                partial = child_scope
        return (Match.NONE, {}) if partial is None else (Match.PARTIAL, partial)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await scope["route"].handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                pass
        raise NoMatchFound(name, path_params)


def app_routes(app: Any) -> list[BaseRoute]:
    """Every route of the app in the order they are tried, the index's in its place."""
    return [inner for route in app.routes for inner in (route if isinstance(route, RouteIndex) else [route])]


def plain_routes(app: Any) -> list[BaseRoute]:
    """The app's routes outside the index (/metrics, the API's documents and their files)."""
    return [route for route in app.routes if not isinstance(route, RouteIndex)]


def api_routes(app: Any) -> list[APIRoute]:
    return [route for route in app_routes(app) if isinstance(route, APIRoute)]


def _route_path(scope: Scope) -> str:
    """The path the app routes on: without the root path a proxy serves the app under."""
    path, root_path = scope["path"], scope.get("root_path", "")
    return path[len(root_path) :] if root_path and path.startswith(root_path) else path


def _first_segment(path: str) -> str | None:
    """`agents` of `/api/agents/faq-bot`; None for a path outside API_PREFIX."""
    parts = path.split("/", 3)
    return parts[2] if len(parts) > 2 and parts[1] == API_PREFIX[1:] else None
