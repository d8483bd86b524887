"""Sending deliveries: one asyncio loop per worker process, many attempts in flight at once.

A slow or hanging receiver holds only its own channel's slots. A worker has
ORGDECK_NOTIFICATION_CONCURRENCY slots in all and gives one channel at most
ORGDECK_NOTIFICATION_CHANNEL_CONCURRENCY of them; a channel whose last attempt got no answer
(timeout, refused connection) gets one until an attempt gets an answer again. Claims skip the
channels with no free slot, so their waiting deliveries never stand in front of anyone else's.

The loop works in cycles, each one short transaction in a thread of its own: record the attempts
finished since the last cycle, renew the leases of the claims held, fan new events out, and claim
due deliveries for the room there is. A claim becomes a task that sends it as soon as its channel
has a free slot; until then it waits, so that a slot that frees between cycles is used at once. A
cycle runs again as soon as a send ends, so the busier the sender, the more each cycle carries.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import smtplib
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpcore

from api.headers import RETRY_AFTER_HEADER, retry_after_seconds
from service.notifications.connections import Answer, Connections, request_target
from service.notifications.messages import JSON, USER_AGENT, content, email_headers, email_message
from service.notifications.outcomes import Attempt, Outcome, record
from service.notifications.queue import (
    STOPPED,
    Claim,
    claim_due,
    fan_out,
    has_due,
    has_new_events,
    release,
    renew_leases,
)
from service.observability import tracing
from service.outbound.urls import HostUnresolved, OutboundRefused, check_outbound_url
from service.outbound.webhooks import signature_headers
from service.settings import Settings
from service.storage.crypto import cipher_for
from service.storage.db import Database, utcnow

logger = logging.getLogger("orgdeck.notifications")

T = TypeVar("T")
# Claims a channel may have waiting per slot: enough for a receiver answering in a millisecond or
# two to keep every slot busy through a database cycle, which takes 25 to 60 ms on PostgreSQL under
# load. Fewer, and a fast channel's slots sit idle through most of each cycle: one worker sent 685
# deliveries a second to one channel there with 4 a slot, about 1,070 with 16, about 1,240 with 32.
# An unanswering channel has none waiting.
WAITING_PER_SLOT = 32
# At shutdown, how long attempts in flight may take to end before they are logged as cut short.
SHUTDOWN_GRACE_SECONDS = 5.0
ERROR_EXCERPT_CHARS = 200
UNEXPECTED = "The attempt failed on the sending side (see the worker's log); it is retried"
# Failures of the connection itself, before or instead of an answer.
CONNECTION_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    OSError,
)


class Slots:
    """Attempts in flight and claims waiting for a slot, per channel and in all.

    A channel may have `per_channel` attempts in flight and WAITING_PER_SLOT times as many claims
    waiting to start the moment one of them ends, so that a fast receiver never waits for the next
    database cycle; a channel whose last attempt got no answer has one slot and nothing waiting,
    until an attempt gets an answer again. The worker has `total` slots in all, given to the
    waiting channels in turn.
    """

    def __init__(self, total: int, per_channel: int) -> None:
        self.total = total
        self.per_channel = per_channel
        self.in_flight: Counter[str] = Counter()
        self.waiting: dict[str, deque[Claim]] = {}
        self.unanswering: set[str] = set()

    def room(self) -> dict[str, int]:
        """How many more claims each channel may take, for the channels that cannot take the most."""
        channels = set(self.in_flight) | set(self.waiting) | self.unanswering
        return {channel: max(0, self._most(channel) - self._held(channel)) for channel in channels}

    @property
    def fresh_room(self) -> int:
        """How many claims a channel with nothing held may take."""
        return (1 + WAITING_PER_SLOT) * self.per_channel

    def room_total(self) -> int:
        held = sum(self.in_flight.values()) + sum(len(queue) for queue in self.waiting.values())
        return max(0, (1 + WAITING_PER_SLOT) * self.total - held)

    def busy(self) -> list[str]:
        return [channel for channel, room in self.room().items() if room == 0]

    def wait(self, claim: Claim) -> None:
        self.waiting.setdefault(claim.channel_id, deque()).append(claim)

    def startable(self) -> list[Claim]:
        """The waiting claims that may start now, taken from each channel in turn; now in flight."""
        started = []
        while True:
            ready = [channel for channel in self.waiting if self.in_flight[channel] < self._limit(channel)]
            if not ready or sum(self.in_flight.values()) >= self.total:
                return started
            for channel in ready:
                if sum(self.in_flight.values()) >= self.total:
                    return started
                started.append(self.waiting[channel].popleft())
                self.in_flight[channel] += 1
                if not self.waiting[channel]:
                    del self.waiting[channel]

    def release(self, channel: str, *, answered: bool) -> None:
        self.in_flight[channel] -= 1
        if not self.in_flight[channel]:
            del self.in_flight[channel]
        if answered:
            self.unanswering.discard(channel)
        else:
            self.unanswering.add(channel)

    def held(self) -> list[Claim]:
        """Every claim waiting for a slot."""
        return [claim for queue in self.waiting.values() for claim in queue]

    def _held(self, channel: str) -> int:
        return self.in_flight[channel] + len(self.waiting.get(channel, ()))

    def _limit(self, channel: str) -> int:
        return 1 if channel in self.unanswering else self.per_channel

    def _most(self, channel: str) -> int:
        """Its slots, and as many claims waiting (none for a channel that does not answer)."""
        return 1 if channel in self.unanswering else self.fresh_room


class Sender:
    """Sends a worker process's deliveries until stopped; `run` blocks, `stop` may be called from
    any thread."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.cipher = cipher_for(settings)
        self.slots = Slots(settings.notification_concurrency, settings.notification_channel_concurrency)
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._finished: list[Attempt] = []
        self._in_flight: dict[asyncio.Task[None], Claim] = {}
        self._connections = Connections(idle_per_origin=settings.notification_channel_concurrency)
        self._renewed_at = 0.0

    def run(self) -> None:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self._main())

    def stop(self) -> None:
        self._stopping.set()
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        # Blocking parts of attempts (name lookups, SMTP) run in threads, one per slot at most, so a
        # receiver whose name or mail server hangs cannot take the threads of any other.
        sends = ThreadPoolExecutor(self.settings.notification_concurrency, thread_name_prefix="orgdeck-send")
        self._loop.set_default_executor(sends)
        database = ThreadPoolExecutor(1, thread_name_prefix="orgdeck-deliveries")
        try:
            while not self._stopping.is_set():
                await self._cycle(database)
            await self._shut_down(database)
        finally:
            await self._connections.aclose()
            database.shutdown(wait=True)

    async def _cycle(self, database: ThreadPoolExecutor) -> None:
        assert self._wake is not None
        self._wake.clear()
        done, self._finished = self._finished, []
        renew = self._leases_to_renew()
        room, busy, limit = self.slots.room(), self.slots.busy(), self.slots.room_total()
        try:
            claims = await self._in(database, self._database_cycle, done, renew, room, busy, limit)
        except Exception:
            # The database is away or the transaction failed: keep what finished, try again later.
            logger.exception("Notification delivery cycle failed; retrying")
            self._finished = done + self._finished
            await asyncio.sleep(self.settings.notification_poll_seconds)
            return
        if renew:
            self._renewed_at = time.monotonic()
        for claim in claims:
            self.slots.wait(claim)
        self._start()
        if not done and not claims:
            await self._connections.prune()
            await self._rest()

    def _start(self) -> None:
        """Start an attempt for each claim that has a slot now."""
        for claim in self.slots.startable():
            task = asyncio.create_task(self._send(claim))
            self._in_flight[task] = claim
            task.add_done_callback(self._in_flight.pop)

    async def _rest(self) -> None:
        """Wait for an attempt to end, for the poll interval, or for stop, whichever comes first."""
        assert self._wake is not None
        try:
            async with asyncio.timeout(self.settings.notification_poll_seconds):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _leases_to_renew(self) -> list[str]:
        """The lease tokens of the claims held, when a third of the lease has gone by."""
        if time.monotonic() - self._renewed_at < self.settings.notification_lease_seconds / 3:
            return []
        return sorted({claim.lease_token for claim in [*self._in_flight.values(), *self.slots.held()]})

    def _database_cycle(
        self, done: list[Attempt], renew: list[str], room: dict[str, int], busy: list[str], limit: int
    ) -> list[Claim]:
        now = utcnow()
        if not done and not renew:
            # Read first: an idle sender must not take SQLite's write lock every round.
            with self.db.session() as session:
                if not has_new_events(session) and not (limit and has_due(session, now=now, busy=busy)):
                    return []
        with self.db.session(write=True) as session:
            record(session, self.settings, done)
            renew_leases(session, self.settings, renew, now=now)
            fan_out(session, now=now)
            if not limit:
                return []
            return claim_due(
                session,
                self.settings,
                self.cipher,
                now=now,
                room=room,
                fresh_room=self.slots.fresh_room,
                limit=limit,
                busy=busy,
            )

    async def _in(self, executor: ThreadPoolExecutor, call: Callable[..., T], *args: Any) -> T:
        assert self._loop is not None
        return await self._loop.run_in_executor(executor, call, *args)

    async def _send(self, claim: Claim) -> None:
        try:
            with tracing.continued(
                "notification delivery",
                claim.trace_context,
                delivery_id=claim.delivery_id,
                attempt=claim.attempt,
            ):
                outcome = await self._attempt(claim, self._connections)
        except Exception:
            # A bug, not the receiver: the attempt fails and is retried like any other.
            logger.exception("Delivery %s: the attempt failed unexpectedly", claim.delivery_id)
            outcome = Outcome(delivered=False, error=UNEXPECTED)
        self._finished.append(Attempt(claim, outcome, utcnow()))
        self.slots.release(claim.channel_id, answered=not outcome.unanswered)
        self._start()
        assert self._wake is not None
        self._wake.set()

    async def _attempt(self, claim: Claim, connections: Connections) -> Outcome:
        if claim.unsendable:
            return Outcome(delivered=False, error=claim.unsendable)
        if claim.message.channel_kind == "email":
            return await self._email(claim)
        sent = content(claim.message, self.settings)
        headers = {"Content-Type": JSON, "User-Agent": USER_AGENT}
        traceparent = tracing.current_traceparent()  # the receiver may continue the trace
        if traceparent:
            headers["traceparent"] = traceparent
        if claim.message.channel_kind == "webhook":
            url = claim.message.channel_config["url"]
            headers |= signature_headers(claim.delivery_id, sent.body, claim.secrets)
        else:
            url = claim.secrets[0]  # a Slack URL is the credential, kept encrypted
        timeout = self.settings.notification_timeout_seconds
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                if _names_a_host(url):  # resolving a name blocks: in a thread
                    await self._blocking(check_outbound_url, url, self.settings)
                else:
                    check_outbound_url(url, self.settings)
                answer = await connections.post(url, headers, sent.body, timeout)
        except HostUnresolved as exc:
            return Outcome(delivered=False, error=str(exc), unanswered=True, request_headers=headers)
        except OutboundRefused as exc:
            return Outcome(delivered=False, error=f"Refused: {exc}", refused=True, request_headers=headers)
        except (TimeoutError, httpcore.TimeoutException):
            return Outcome(
                delivered=False,
                latency_ms=_elapsed_ms(started),
                error=f"No answer within {timeout:g} s",
                unanswered=True,
                request_headers=headers,
            )
        except CONNECTION_ERRORS as exc:
            return Outcome(
                delivered=False,
                latency_ms=_elapsed_ms(started),
                error=f"{type(exc).__name__}: {exc}",
                unanswered=True,
                request_headers=headers,
            )
        return _answered(answer, _elapsed_ms(started), headers)

    async def _email(self, claim: Claim) -> Outcome:
        settings = self.settings
        email = email_message(claim.message, settings)
        shown = email_headers(email)
        if not settings.smtp_host:
            return Outcome(
                delivered=False, error="Email is not configured: set ORGDECK_SMTP_HOST", request_headers=shown
            )
        started = time.monotonic()
        try:
            async with asyncio.timeout(settings.notification_timeout_seconds):
                await self._blocking(_send_email, email, settings)
        except TimeoutError:
            error = f"SMTP: no answer within {settings.notification_timeout_seconds:g} s"
            return Outcome(
                delivered=False,
                latency_ms=_elapsed_ms(started),
                error=error,
                unanswered=True,
                request_headers=shown,
            )
        except (smtplib.SMTPException, OSError) as exc:
            return Outcome(
                delivered=False, latency_ms=_elapsed_ms(started), error=f"SMTP: {exc}", request_headers=shown
            )
        return Outcome(delivered=True, latency_ms=_elapsed_ms(started), request_headers=shown)

    async def _blocking(self, call: Callable[..., T], *args: Any) -> T:
        assert self._loop is not None
        return await self._loop.run_in_executor(None, call, *args)

    async def _shut_down(self, database: ThreadPoolExecutor) -> None:
        """Give back the claims not started, let the attempts in flight end for a moment, log the
        rest as cut short, and record them all."""
        unstarted = self.slots.held()
        self.slots.waiting.clear()
        if self._in_flight:
            await asyncio.wait(list(self._in_flight), timeout=SHUTDOWN_GRACE_SECONDS)
        for task, claim in list(self._in_flight.items()):
            if not task.done():
                task.cancel()
                self._finished.append(Attempt(claim, Outcome(delivered=False, error=STOPPED), utcnow()))
        done, self._finished = self._finished, []
        try:
            await self._in(database, self._last_cycle, done, unstarted)
        except Exception:
            # Their leases run out and the next worker takes them over.
            logger.exception("Could not record %d attempts at shutdown", len(done))

    def _last_cycle(self, done: list[Attempt], unstarted: list[Claim]) -> None:
        with self.db.session(write=True) as session:
            record(session, self.settings, done)
            release(session, unstarted)


def _answered(answer: Answer, latency_ms: int, sent_headers: dict[str, str]) -> Outcome:
    text = answer.body.decode(errors="replace")
    common = {
        "response_status": answer.status,
        "latency_ms": latency_ms,
        "request_headers": sent_headers,
        "response_headers": answer.headers,
        "response_body": text,
    }
    if 200 <= answer.status < 300:
        return Outcome(delivered=True, **common)
    excerpt = text[:ERROR_EXCERPT_CHARS].strip()
    return Outcome(
        delivered=False,
        error=f"HTTP {answer.status}" + (f": {excerpt}" if excerpt else ""),
        retry_after=retry_after_seconds(answer.headers.get(RETRY_AFTER_HEADER.lower())),
        gone=answer.status == 410,
        **common,
    )


def _send_email(email: Any, settings: Settings) -> None:
    with smtplib.SMTP(
        settings.smtp_host or "", settings.smtp_port, timeout=settings.notification_timeout_seconds
    ) as smtp:
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_username:
            smtp.login(settings.smtp_username, settings.smtp_password or "")
        smtp.send_message(email)


@functools.lru_cache(maxsize=4096)
def _names_a_host(url: str) -> bool:
    """Whether the URL's host is a name to look up, rather than an address."""
    try:
        ipaddress.ip_address(request_target(url)[0].host.decode().strip("[]"))
    except ValueError:
        return True
    return False


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when it is installed (it comes with uvicorn's standard extras), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
