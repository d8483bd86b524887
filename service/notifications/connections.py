"""The sender's HTTP: keep-alive connections per receiver, one request at a time on each, and the
first bytes and headers of each answer (as many as are kept)."""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass

import httpcore
import httpx

from api.notifications import RESPONSE_BODY_BYTES

# How long idle connections are kept for the next attempt to the same receiver.
KEEPALIVE_SECONDS = 30.0
MAX_RESPONSE_HEADERS = 50
HEADER_VALUE_CHARS = 500


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Connections:
    """Keep-alive HTTP/1.1 connections to each origin, each carrying one request at a time.

    These are httpx's own connections (httpcore) without its pool: the pool re-examines every
    waiting request and every connection on each request, which with many sends in flight costs
    more than the sends. The slots already bound how many requests run at once, so a stack of
    idle connections per origin is all the pooling needed.
    """

    def __init__(self, *, idle_per_origin: int) -> None:
        self._idle: dict[tuple[bytes, bytes, int], list[httpcore.AsyncHTTPConnection]] = {}
        self._idle_per_origin = idle_per_origin

    async def post(self, url: str, headers: dict[str, str], body: bytes, timeout: float) -> Answer:
        """POST `body`; the answer with at most the first RESPONSE_BODY_BYTES of its body."""
        origin, target, host = request_target(url)
        sent = [(b"Host", host), (b"Content-Length", str(len(body)).encode())]
        sent += [(name.encode(), value.encode()) for name, value in headers.items()]
        limits = dict.fromkeys(("connect", "read", "write", "pool"), timeout)
        request = httpcore.Request(
            b"POST", target, headers=sent, content=body, extensions={"timeout": limits}
        )
        key = (origin.scheme, origin.host, origin.port)
        connection = self._reusable(key) or httpcore.AsyncHTTPConnection(
            origin, ssl_context=_tls(), keepalive_expiry=KEEPALIVE_SECONDS
        )
        try:
            response = await connection.handle_async_request(request)
            try:
                received = await _first_bytes(response, RESPONSE_BODY_BYTES)
            finally:
                await response.aclose()
        except BaseException:
            await connection.aclose()
            raise
        self._keep(key, connection)
        return Answer(response.status, _header_values(response.headers), received)

    def _reusable(self, key: tuple[bytes, bytes, int]) -> httpcore.AsyncHTTPConnection | None:
        idle = self._idle.get(key, [])
        while idle:
            connection = idle.pop()
            if connection.is_idle() and not connection.has_expired():
                return connection
        return None

    def _keep(self, key: tuple[bytes, bytes, int], connection: httpcore.AsyncHTTPConnection) -> None:
        """Keep a connection whose answer was read whole (any other one is closed already)."""
        idle = self._idle.setdefault(key, [])
        if connection.is_idle() and len(idle) < self._idle_per_origin:
            idle.append(connection)

    async def prune(self) -> None:
        """Close the idle connections whose receiver closed them or whose keep-alive ran out."""
        for key, idle in list(self._idle.items()):
            stale = [connection for connection in idle if connection.has_expired()]
            for connection in stale:
                idle.remove(connection)
                await connection.aclose()
            if not idle:
                del self._idle[key]

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                await connection.aclose()
        self._idle.clear()


@functools.lru_cache(maxsize=4096)
def request_target(url: str) -> tuple[httpcore.Origin, httpcore.URL, bytes]:
    """Where a URL's requests go: its origin, its target and its Host header (parsed once)."""
    parsed = httpx.URL(url)
    scheme = parsed.raw_scheme
    origin = httpcore.Origin(scheme, parsed.raw_host, parsed.port or (443 if scheme == b"https" else 80))
    target = httpcore.URL(scheme=scheme, host=parsed.raw_host, port=origin.port, target=parsed.raw_path)
    return origin, target, parsed.netloc


def _header_values(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """An answer's headers by lowercase name (repeated ones joined), as many as are kept."""
    values: dict[str, str] = {}
    for name, value in raw[:MAX_RESPONSE_HEADERS]:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")[:HEADER_VALUE_CHARS]
        values[key] = f"{values[key]}, {text}" if key in values else text
    return values


async def _first_bytes(response: httpcore.Response, limit: int) -> bytes:
    """Up to `limit` bytes of the body; a longer body is not read on (its connection is closed)."""
    received = b""
    async for chunk in response.aiter_stream():
        received += chunk
        if len(received) >= limit:
            break
    return received[:limit]


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's own certificate checks, made once per process: loading the CA certificates takes
    longer than a whole delivery to a nearby receiver."""
    return httpx.create_ssl_context()
