"""Prompt retrieval against the authenticated baseline, in one run on one service.

    .venv/bin/python bench/registries.py                  # fresh SQLite, about four minutes
    .venv/bin/python -m bench.registries --database-url postgresql://postgres@127.0.0.1:5432/bench

Publishes 10,000 versions across 500 artifacts (half in a private registry, half in a public one,
20 versions each, `production` on the 10th) through the API, then measures retrieval by label and by
version (private with the key, public without one), cycling over the artifacts, next to
GET /api/api-keys?orgSlug= with a key. The reach: median and p99 of every retrieval at most 1.5 times
the baseline's.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    OrgKey,
    Series,
    Target,
    add_arguments,
    describe_setup,
    format_table,
    load_settings,
    measure,
    orgdeck_service,
    ratio,
    run,
    scratch_directory,
    times,
)

ARTIFACTS = 500
VERSIONS_PER_ARTIFACT = 20
PRODUCTION_VERSION = 10
PUBLISH_THREADS = 4
# Distinct paths each retrieval target cycles through, so no single row stays hot.
PATHS_PER_TARGET = 200
MAX_RATIO = 1.5
PROMPT = "You are the {{team}} assistant of Orgdeck. Revision {revision} of {artifact}. " * 8


def seed(base_url: str, org: OrgKey) -> dict[str, str]:
    """Create the two registries and publish every version; returns visibility → registryRef."""
    refs: dict[str, str] = {}
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=60) as http:
        for visibility in ("private", "public"):
            answer = http.post(
                "/api/registries",
                json={"orgSlug": org.slug, "name": f"bench-{visibility}", "visibility": visibility},
            )
            answer.raise_for_status()
            refs[visibility] = answer.json()["registryRef"]
        jobs = [
            (refs["private" if index % 2 == 0 else "public"], f"prompt-{index:03d}")
            for index in range(ARTIFACTS)
        ]

        def publish_all(job: tuple[str, str]) -> None:
            ref, artifact = job
            for revision in range(1, VERSIONS_PER_ARTIFACT + 1):
                labels = ["production"] if revision == PRODUCTION_VERSION else []
                body = {
                    "registryRef": ref,
                    "name": artifact,
                    "content": PROMPT.format(revision=revision, artifact=artifact),
                    "labels": labels,
                }
                http.post("/api/registries/artifacts", json=body).raise_for_status()

        started = time.monotonic()
        with ThreadPoolExecutor(PUBLISH_THREADS) as pool:
            list(pool.map(publish_all, jobs))
        elapsed = time.monotonic() - started
    published = ARTIFACTS * VERSIONS_PER_ARTIFACT
    print(
        f"Published {published:,} versions in {elapsed:.1f} s ({published / elapsed:,.0f}/s)", file=sys.stderr
    )
    return refs


def retrieve_paths(ref: str, selector: str) -> list[str]:
    first = 0 if ref.endswith("private") else 1  # even artifacts are private, odd ones public
    names = [f"prompt-{index:03d}" for index in range(first, ARTIFACTS, 2)][:PATHS_PER_TARGET]
    return [f"/api/registries/artifacts/retrieve?registryRef={ref}&name={name}&{selector}" for name in names]


def rows(series: list[Series], baseline: Series) -> list[list[str]]:
    return [
        [
            s.label,
            f"{s.requests_per_second:,.0f}",
            f"{s.p50_ms:.2f}",
            f"{s.p99_ms:.2f}",
            times(ratio(s.p50_ms, baseline.p50_ms)),
            times(ratio(s.p99_ms, baseline.p99_ms)),
        ]
        for s in series
    ]


def verdict(series: list[Series], baseline: Series) -> str:
    worst = max(max(ratio(s.p50_ms, baseline.p50_ms), ratio(s.p99_ms, baseline.p99_ms)) for s in series)
    reached = worst <= MAX_RATIO
    return f"Worst retrieval ratio {times(worst)} (reach ≤ {times(MAX_RATIO)}): {'reached' if reached else 'NOT reached'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/registries.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    load = load_settings(args)
    print(f"Registry retrieval: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with scratch_directory() as workdir, orgdeck_service(workdir, database_url=args.database_url) as service:
        org = service.create_org()
        refs = seed(service.origin, org)
        private_by_label = retrieve_paths(refs["private"], "label=production")
        private_by_version = retrieve_paths(refs["private"], f"version={VERSIONS_PER_ARTIFACT - 3}")
        public_by_label = retrieve_paths(refs["public"], "label=production")
        public_by_version = retrieve_paths(refs["public"], f"version={VERSIONS_PER_ARTIFACT - 3}")
        targets = [
            Target(
                "GET /api/api-keys?orgSlug= (key)", service, f"/api/api-keys?orgSlug={org.slug}", org.headers
            ),
            Target(
                "retrieve by label, private (key)",
                service,
                private_by_label[0],
                org.headers,
                private_by_label,
            ),
            Target(
                "retrieve by version, private (key)",
                service,
                private_by_version[0],
                org.headers,
                private_by_version,
            ),
            Target("retrieve by label, public (no key)", service, public_by_label[0], {}, public_by_label),
            Target(
                "retrieve by version, public (no key)", service, public_by_version[0], {}, public_by_version
            ),
        ]
        series = measure(targets, load)
    baseline, retrievals = series[0], series[1:]
    print()
    print(
        f"{describe_setup(load, args.database_url)}; {ARTIFACTS * VERSIONS_PER_ARTIFACT:,} versions in "
        f"{ARTIFACTS} artifacts; ratios against the authenticated baseline"
    )
    print()
    headers = ["Target", "req/s", "p50 ms", "p99 ms", "p50 / baseline", "p99 / baseline"]
    print(format_table(headers, rows(series, baseline)))
    print()
    print(verdict(retrievals, baseline))
    return 0


if __name__ == "__main__":
    run(main)
