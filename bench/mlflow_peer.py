"""Our prompt registry against MLflow's, side by side in one run.

    .venv/bin/python bench/mlflow_peer.py        # installs MLflow once (a few minutes), then about three
    .venv/bin/python -m bench.mlflow_peer --database-url postgresql://postgres@127.0.0.1:5432/bench

MLflow is installed into a virtualenv of its own under ~/.cache/orgdeck-bench (never into the
project's), and its server runs on SQLite with one worker, pinned to the server core as ours is.
Our service runs as `python -m service serve` does by default, with the rate limit lifted for
the bench only. Two measurements, each through the peer's own ways:
- sequential publish + retrieve pairs: a new version of a prompt, then that version read back, one
  pair after another, by each side's own Python client (MLflow's `register_prompt` and
  `load_prompt`; our `registries.publish` and `registries.retrieve`), run on the load core;
- GET of one version at 32 connections with wrk: MLflow's `model-versions/get` (where a prompt's
  version lives) against our `registries/artifacts/retrieve?version=`.
The reaches: pairs/s ≥ 5x MLflow's, GET throughput ≥ 10x, GET p99 ≤ 0.2x. Beside them, for scale,
the anchor app (bench/anchor.py) on our database: how many two-read requests the stack itself
serves on this machine in this run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    LOAD_CPUS,
    SERIES_HEADERS,
    BenchError,
    OrgKey,
    ServerProcess,
    Target,
    add_arguments,
    anchor_server,
    describe_setup,
    format_table,
    load_settings,
    measure,
    orgdeck_service,
    ratio,
    run,
    scratch_directory,
    series_rows,
)

MLFLOW_VERSION = "3.17.2"
PEER_VENV = Path.home() / ".cache" / "orgdeck-bench" / f"mlflow-{MLFLOW_VERSION}"
PAIRS = 300
WARMUP_PAIRS = 20
PROMPT = "You are the {{team}} assistant. Revision {n}: answer briefly and cite the runbook."
MIN_PAIRS_RATIO = 5.0
MIN_GET_RATIO = 10.0
MAX_GET_P99_RATIO = 0.2
# The anchor's read (bench/anchor.py), measured beside for scale: what the stack serves at its floor.
ANCHOR_PATH = "/api/api-keys?orgSlug={}"

# Each side's own client, timing `pairs` publish + retrieve pairs after a warm-up; prints pairs/s.
MLFLOW_PAIRS = """
import sys, time
import mlflow
url, name, pairs, warmup, text = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
mlflow.set_tracking_uri(url)
def pair(n):
    version = mlflow.genai.register_prompt(name=name, template=text.replace("{n}", str(n)))
    assert mlflow.genai.load_prompt(f"prompts:/{name}/{version.version}").template
for n in range(warmup):
    pair(n)
started = time.perf_counter()
for n in range(warmup, warmup + pairs):
    pair(n)
print(pairs / (time.perf_counter() - started))
"""
OURS_PAIRS = """
import sys, time
from api import OrgdeckClient
url, key, slug, registry, pairs, warmup, text = sys.argv[1:8]
pairs, warmup = int(pairs), int(warmup)
with OrgdeckClient(url, key, org_slug=slug) as client:
    def pair(n):
        published = client.registries.publish(registry, "peer", text.replace("{n}", str(n)))
        assert client.registries.retrieve(registry, "peer", version=published.version).content
    for n in range(warmup):
        pair(n)
    started = time.perf_counter()
    for n in range(warmup, warmup + pairs):
        pair(n)
    print(pairs / (time.perf_counter() - started))
"""


def peer_python() -> Path:
    """MLflow's own interpreter, installing it on first use."""
    python = PEER_VENV / "bin" / "python"
    if not (PEER_VENV / "bin" / "mlflow").exists():
        print(f"Installing MLflow {MLFLOW_VERSION} into {PEER_VENV} (once)…", file=sys.stderr)
        venv.create(PEER_VENV, with_pip=True)
        install = [str(python), "-m", "pip", "install", "-q", f"mlflow=={MLFLOW_VERSION}"]
        if subprocess.run(install, check=False).returncode != 0:
            raise BenchError(f"could not install mlflow=={MLFLOW_VERSION} into {PEER_VENV}")
    return python


@contextmanager
def mlflow_server(workdir: Path) -> Iterator[ServerProcess]:
    mlflow = PEER_VENV / "bin" / "mlflow"
    argv = [
        *(str(mlflow), "server", "--host", "127.0.0.1", "--workers", "1"),
        *("--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}"),
        *("--default-artifact-root", str(workdir / "mlflow-artifacts")),
    ]
    server = ServerProcess("MLflow server", argv, os.environ, workdir / "mlflow.log")
    try:
        server.wait_until_ready("/health")
        yield server
    finally:
        server.stop()


def pairs_per_second(python: str | Path, script: str, *arguments: str) -> float:
    command = ["taskset", "-c", LOAD_CPUS, str(python), "-c", script, *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise BenchError(f"publish + retrieve pairs failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def publish_first_version(python: Path, url: str, name: str) -> str:
    """Publish version 1 of an MLflow prompt; the path that reads it."""
    script = "import sys, mlflow; mlflow.set_tracking_uri(sys.argv[1]); mlflow.genai.register_prompt(name=sys.argv[2], template='Hello {{name}}')"
    subprocess.run([str(python), "-c", script, url, name], check=True, capture_output=True, timeout=300)
    return f"/api/2.0/mlflow/model-versions/get?name={name}&version=1"


def ours_first_version(url: str, org: OrgKey) -> tuple[str, str]:
    """Our registry with version 1 of a prompt; (registryRef, the path that reads it)."""
    import httpx

    with httpx.Client(base_url=url, headers=org.headers, timeout=60) as http:
        http.post("/registries", json={"orgSlug": org.slug, "name": "peer"}).raise_for_status()
        ref = f"{org.slug}/peer"
        http.post(
            "/registries/artifacts", json={"registryRef": ref, "name": "fixed", "content": "Hello {{name}}"}
        ).raise_for_status()
    return ref, f"/api/registries/artifacts/retrieve?registryRef={ref}&name=fixed&version=1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/mlflow_peer.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--pairs", type=int, default=PAIRS, help="measured publish + retrieve pairs per side")
    args = parser.parse_args(argv)
    load = load_settings(args)
    python = peer_python()
    print(f"MLflow peer: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with (
        scratch_directory() as workdir,
        mlflow_server(workdir) as peer,
        orgdeck_service(workdir, database_url=args.database_url) as service,
    ):
        org = service.create_org()
        ref, ours_path = ours_first_version(service.url("/api"), org)
        peer_path = publish_first_version(python, peer.origin, "fixed")
        print("  publish + retrieve pairs…", file=sys.stderr)
        peer_pairs = pairs_per_second(
            python, MLFLOW_PAIRS, peer.origin, "paired", str(args.pairs), str(WARMUP_PAIRS), PROMPT
        )
        our_pairs = pairs_per_second(
            sys.executable,
            OURS_PAIRS,
            service.url("/api"),
            org.api_key,
            org.slug,
            ref,
            str(args.pairs),
            str(WARMUP_PAIRS),
            PROMPT,
        )
        with anchor_server(workdir, service) as anchor:
            targets = [
                Target("MLflow: GET model-versions/get", peer, peer_path),
                Target(
                    "ours: GET artifacts/retrieve?version= (key)", service, ours_path, headers=org.headers
                ),
                Target(
                    "anchor: bare FastAPI, two reads (scale)",
                    anchor,
                    ANCHOR_PATH.format(org.slug),
                    headers=org.headers,
                ),
            ]
            series = measure(targets, load)
    print()
    print(describe_setup(load, args.database_url) + f"; MLflow {MLFLOW_VERSION} on SQLite, one worker")
    print()
    print(format_table(SERIES_HEADERS, series_rows(series)))
    print()
    peer_get, our_get, floor = series
    pair_ratio = ratio(our_pairs, peer_pairs)
    get_ratio = ratio(our_get.requests_per_second, peer_get.requests_per_second)
    p99_ratio = ratio(our_get.p99_ms, peer_get.p99_ms)
    rows = [
        [
            "publish + retrieve pairs/s (sequential)",
            f"{peer_pairs:,.0f}",
            f"{our_pairs:,.0f}",
            f"{pair_ratio:.2f}x",
            f"≥ {MIN_PAIRS_RATIO}x",
            _reached(pair_ratio >= MIN_PAIRS_RATIO),
        ],
        [
            "GET one version, req/s (32 connections)",
            f"{peer_get.requests_per_second:,.0f}",
            f"{our_get.requests_per_second:,.0f}",
            f"{get_ratio:.2f}x",
            f"≥ {MIN_GET_RATIO}x",
            _reached(get_ratio >= MIN_GET_RATIO),
        ],
        [
            "GET one version, p99 ms",
            f"{peer_get.p99_ms:.1f}",
            f"{our_get.p99_ms:.1f}",
            f"{p99_ratio:.2f}x",
            f"≤ {MAX_GET_P99_RATIO}x",
            _reached(p99_ratio <= MAX_GET_P99_RATIO),
        ],
    ]
    print(format_table(["Figure", "MLflow", "Orgdeck", "ours / MLflow", "reach", ""], rows))
    print()
    print(
        f"For scale, the anchor app (bench/anchor.py: one bare FastAPI route, two SQLAlchemy Core reads) "
        f"served {floor.requests_per_second:,.0f} req/s in this run, "
        f"{ratio(floor.requests_per_second, peer_get.requests_per_second):.2f}x MLflow; "
        f"our GET served {ratio(our_get.requests_per_second, floor.requests_per_second):.2f}x the anchor."
    )
    return 0


def _reached(ok: bool) -> str:
    return "reached" if ok else "NOT reached"


if __name__ == "__main__":
    run(main)
