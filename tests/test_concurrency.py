"""Many simultaneous requests against few threads and connections: every one is answered."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from service.runtime.server import ServerThread
from tests.conftest import make_settings

CLIENTS = 24
REQUESTS = 96


def test_more_simultaneous_requests_than_threads_and_connections_all_succeed(tmp_path, database_url, db, org):
    # One worker thread and the smallest pool: a request that kept a connection while waiting for
    # the thread, with the thread waiting for a connection, would stall until the pool timed out
    # and then fail with 500.
    server = ServerThread(make_settings(tmp_path, database_url, threads=1, db_pool_size=1)).start()
    try:
        with (
            httpx.Client(base_url=server.url + "/", headers=org.headers, timeout=120) as http,
            ThreadPoolExecutor(CLIENTS) as clients,
        ):

            def list_keys(_: int) -> int:
                return http.get("api-keys", params={"orgSlug": org.slug}).status_code

            statuses = list(clients.map(list_keys, range(REQUESTS)))
    finally:
        server.stop()
    assert statuses == [200] * REQUESTS
