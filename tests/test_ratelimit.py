"""Rate limiting: 429 with Retry-After and RateLimit-* headers; budgets shared through Redis."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
import redis

from service.runtime.server import ServerThread
from tests.conftest import REDIS_URL, make_settings

WINDOW_SECONDS = 30  # the Redis test's window is twice as long, so its ends are among these


@pytest.fixture
def limited_server(tmp_path, database_url, db):
    server = ServerThread(
        make_settings(tmp_path, database_url, rate_limit=3, rate_limit_window_seconds=WINDOW_SECONDS)
    )
    yield server.start()
    server.stop()


@pytest.fixture(autouse=True)
def time_left_in_the_window():
    """Windows are fixed (multiples of their length since the epoch), so requests that straddle an
    end would find a fresh budget midway: each test starts with 10 s left."""
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < 10:
        time.sleep(left + 0.05)


def test_fourth_request_in_a_window_is_429_with_headers(limited_server, org):
    url = limited_server.url + "/whoami"
    answers = [httpx.get(url, headers=org.headers) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["ratelimit-remaining"] for a in answers] == ["2", "1", "0", "0"]
    assert all(a.headers["ratelimit-limit"] == "3" for a in answers)
    limited = answers[-1]
    assert 1 <= int(limited.headers["retry-after"]) <= WINDOW_SECONDS
    assert limited.headers["retry-after"] == limited.headers["ratelimit-reset"]
    assert limited.json()["code"] == "rate_limited"


def test_each_key_has_its_own_budget(limited_server, org, other_org):
    url = limited_server.url + "/whoami"
    for _ in range(3):
        httpx.get(url, headers=org.headers)
    assert httpx.get(url, headers=org.headers).status_code == 429
    assert httpx.get(url, headers=other_org.headers).status_code == 200


def test_requests_without_a_key_are_limited_per_address(limited_server):
    url = limited_server.url + "/whoami"
    statuses = [httpx.get(url).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]


def test_health_is_never_limited(limited_server):
    assert {httpx.get(limited_server.url + "/health").status_code for _ in range(6)} == {200}


def test_two_processes_share_one_budget_through_redis(tmp_path, database_url, db, org):
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        from tests.conftest import require

        require("Redis", f"{REDIS_URL}: {exc}")
    settings = make_settings(
        tmp_path,
        database_url,
        rate_limit=4,
        rate_limit_window_seconds=2 * WINDOW_SECONDS,
        redis_url=REDIS_URL,
    )
    first, second = ServerThread(settings).start(), ServerThread(settings).start()
    try:
        headers = {**org.headers, "X-Request-Id": uuid.uuid4().hex}
        statuses = [
            httpx.get(server.url + "/whoami", headers=headers).status_code
            for server in (first, second, first, second, first, second)
        ]
    finally:
        first.stop()
        second.stop()
    assert statuses == [200, 200, 200, 200, 429, 429]
