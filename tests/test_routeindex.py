"""The route index finds, for every path and method, the route a walk through every route in order
would find, and refuses a route it could not index."""

from __future__ import annotations

import re

import pytest
from fastapi import APIRouter
from starlette.routing import Match

from service.app import API_ROUTERS, create_app
from service.http.routeindex import RouteIndex, app_routes
from service.http.routing import api_router
from service.settings import Settings

API_ROUTES = [route for router in API_ROUTERS for route in router.routes]
METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")


def _scope(path: str, method: str, root_path: str = "") -> dict:
    return {"type": "http", "path": root_path + path, "root_path": root_path, "method": method}


def _walk(path: str, method: str) -> tuple[Match, object]:
    """What trying every route in order finds: the first FULL match, else the first PARTIAL."""
    partial = None
    for route in API_ROUTES:
        match, _ = route.matches(_scope(path, method))
        if match == Match.FULL:
            return match, route
        if match == Match.PARTIAL and partial is None:
            partial = route
    return (Match.NONE, None) if partial is None else (Match.PARTIAL, partial)


def _concrete(path_format: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path_format)


# Every route's own path, with its parameters filled both by plain words and by the fixed words
# other routes use (`deployment-jobs`, `list`), so that the order between them is exercised.
PATHS = sorted(
    {
        _concrete(route.path_format, value)
        for route in API_ROUTES
        for value in ("x1", "deployment-jobs", "list")
    }
    | {"/api", "/api/", "/api/nope", "/apis/health", "/health", "/api/agents"}
)


@pytest.mark.parametrize("path", PATHS)
def test_the_index_finds_what_a_walk_through_every_route_finds(path):
    index = RouteIndex(API_ROUTES)
    for method in METHODS:
        expected_match, expected_route = _walk(path, method)
        match, child_scope = index.matches(_scope(path, method))
        assert match == expected_match, (method, path)
        assert child_scope.get("route") is expected_route, (method, path)


def test_the_index_routes_under_a_proxys_root_path():
    index = RouteIndex(API_ROUTES)
    match, child_scope = index.matches(_scope("/api/health", "GET", root_path="/orgdeck"))
    assert match == Match.FULL
    assert child_scope["route"].path_format == "/api/health"


def test_a_route_outside_the_api_or_with_a_variable_first_segment_is_refused():
    outside = APIRouter()
    outside.get("/health")(lambda: None)
    with pytest.raises(ValueError, match="/health"):
        RouteIndex(outside.routes)
    variable = api_router("", tags=["Test"])

    @variable.get("/{anything}")
    def anything(anything: str) -> str:
        return anything

    with pytest.raises(ValueError, match=re.escape("/api/{anything}")):
        RouteIndex(variable.routes)


def test_the_app_serves_every_api_route_through_its_index(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, run_worker=False))
    indexes = [route for route in app.routes if isinstance(route, RouteIndex)]
    assert len(indexes) == 1
    assert [route for route in app_routes(app) if route in API_ROUTES] == API_ROUTES
