"""Concurrent publishes against the live service: no duplicate numbers, no gaps, one winner per version."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from api import OrgdeckClient
from api.errors import BadRequest

T = TypeVar("T")
THREADS = 8
PUBLISHES_PER_THREAD = 10


def in_parallel(calls: list[Callable[[], T]]) -> list[T | Exception]:
    def run(call: Callable[[], T]) -> T | Exception:
        try:
            return call()
        except BadRequest as error:
            return error

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        return list(pool.map(run, calls))


@pytest.fixture
def ref(client) -> str:
    return client.registries.create(f"busy-{uuid.uuid4().hex[:8]}").registry_ref


def test_concurrent_publishes_number_versions_without_duplicates_or_gaps(server, org, client, ref):
    def publisher(thread: int) -> Callable[[], list[int]]:
        def publish_all() -> list[int]:
            # One client per thread: each has its own connections, as separate CI jobs would.
            with OrgdeckClient(server.url, org.key, org_slug=org.slug) as own:
                return [
                    own.registries.publish(ref, "shared", f"thread {thread} publish {n}").number
                    for n in range(PUBLISHES_PER_THREAD)
                ]

        return publish_all

    results = in_parallel([publisher(thread) for thread in range(THREADS)])
    numbers = sorted(number for result in results for number in result)  # type: ignore[union-attr]
    total = THREADS * PUBLISHES_PER_THREAD
    assert numbers == list(range(1, total + 1))
    versions = client.registries.versions(ref, "shared", limit=1000)
    assert versions.total == total
    assert sorted(int(v.version) for v in versions.items) == list(range(1, total + 1))
    assert client.registries.retrieve(ref, "shared", label="latest").number == total
    assert versions.items[0].labels == ["latest"]


def test_concurrent_first_publishes_of_a_new_artifact_create_it_once(server, org, client, ref):
    def first_publish(thread: int) -> Callable[[], int]:
        def publish() -> int:
            with OrgdeckClient(server.url, org.key, org_slug=org.slug) as own:
                return own.registries.publish(ref, "fresh", f"from thread {thread}").number

        return publish

    numbers = in_parallel([first_publish(thread) for thread in range(THREADS)])
    assert sorted(numbers) == list(range(1, THREADS + 1))  # type: ignore[type-var]
    assert [a.name for a in client.registries.artifacts(ref).items] == ["fresh"]


def test_concurrent_publishes_of_one_explicit_version_have_one_winner(server, org, client, ref):
    def publish(content: str) -> Callable[[], object]:
        def call() -> object:
            with OrgdeckClient(server.url, org.key, org_slug=org.slug) as own:
                return own.registries.publish(ref, "pinned", content, version="3.1.4")

        return call

    contents = [f"candidate {n}" for n in range(THREADS)]
    results = in_parallel([publish(content) for content in contents])
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, BadRequest)]
    assert len(winners) == 1 and len(losers) == THREADS - 1
    assert all(loser.code == "version_exists" for loser in losers)
    stored = client.registries.retrieve(ref, "pinned", version="3.1.4")
    assert stored.content == winners[0].content  # type: ignore[attr-defined]
    assert client.registries.versions(ref, "pinned").total == 1


def test_concurrent_identical_republishes_create_one_version(server, org, client, ref):
    def publish() -> object:
        with OrgdeckClient(server.url, org.key, org_slug=org.slug) as own:
            return own.registries.publish(ref, "same", "identical", version="1.0.0")

    results = in_parallel([publish] * THREADS)
    assert sum(result.created for result in results) == 1  # type: ignore[union-attr]
    assert {result.content_hash for result in results} == {results[0].content_hash}  # type: ignore[union-attr]
    assert client.registries.versions(ref, "same").total == 1
