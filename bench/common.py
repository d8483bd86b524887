"""What every benchmark shares: server processes, wrk runs, summaries and tables.

A server runs as its own process pinned to one core and wrk to the other (`taskset`), and every
target is driven at the same fixed connection count, so figures from one bench compare with another.
Services are started exactly the way `python -m service serve` runs in production.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_CPUS = "0"
LOAD_CPUS = "1"
CONNECTIONS = 32
SECONDS = 8
WARMUP_SECONDS = 2
ROUNDS = 3
# High enough never to trip at any speed we reach, yet every request still goes through the limiter.
RATE_LIMIT = 1_000_000_000
STARTUP_TIMEOUT_SECONDS = 60
# wrk counts a request slower than this as an error: nothing here should come near it.
REQUEST_TIMEOUT_SECONDS = 10


class BenchError(RuntimeError):
    """A run that cannot be measured (a server that would not start, errors under load)."""


@dataclass(frozen=True)
class LoadSettings:
    connections: int = CONNECTIONS
    seconds: int = SECONDS
    warmup_seconds: int = WARMUP_SECONDS
    rounds: int = ROUNDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every bench takes."""
    parser.add_argument(
        "--database-url",
        help="run the service on this database (e.g. postgresql://postgres@127.0.0.1:5432/bench) "
        "instead of a fresh SQLite file; it should be a scratch database",
    )
    parser.add_argument(
        "--connections", type=int, default=CONNECTIONS, help="open connections (default %(default)s)"
    )
    parser.add_argument(
        "--seconds", type=int, default=SECONDS, help="length of one measurement (default %(default)s)"
    )
    parser.add_argument(
        "--warmup", type=int, default=WARMUP_SECONDS, help="unmeasured load before a target's first round"
    )
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help="measurements per target (default %(default)s)"
    )


def load_settings(args: argparse.Namespace) -> LoadSettings:
    """The load's settings; a bench that drives load asks for them first, so a missing wrk stops it
    before minutes of seeding rather than after."""
    if shutil.which("wrk") is None:
        raise BenchError("wrk is not installed; on Debian: apt-get install wrk")
    return LoadSettings(args.connections, args.seconds, args.warmup, args.rounds)


# --- Servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_answering(
    process: subprocess.Popen[bytes], url: str, *, name: str, log_path: Path, every: float = 0.1
) -> None:
    """Until `url` answers 200, asked every `every` seconds; BenchError, with the end of the log, when
    the process ends first or it does not answer within STARTUP_TIMEOUT_SECONDS."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{name} exited with {process.returncode}:\n{log_tail(log_path)}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(every)
    raise BenchError(f"{name} did not answer {url} within {STARTUP_TIMEOUT_SECONDS} s")


def log_tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class ServerProcess:
    """A server process pinned to the server core, with its output kept in a log file."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log_path = log_path
        self._log = log_path.open("wb")
        self._process = subprocess.Popen(
            ["taskset", "-c", SERVER_CPUS, *argv, "--port", str(self.port)],
            cwd=REPO_ROOT,
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def wait_until_ready(self, path: str) -> None:
        wait_until_answering(self._process, self.url(path), name=self.name, log_path=self.log_path)

    def cpu_seconds(self) -> float:
        """CPU time the process and its descendants (a server's worker processes) have used so far,
        all threads, user and system."""
        parents: dict[int, int] = {}
        ticks: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:  # ended while listed
                continue
            pid = int(stat.parent.name)
            parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
        family, total = {self._process.pid}, 0
        for pid in sorted(ticks):  # children have higher pids than their parents, short of a wrap
            if pid in family or parents[pid] in family:
                family.add(pid)
                total += ticks[pid]
        return total / os.sysconf("SC_CLK_TCK")

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


@dataclass(frozen=True)
class OrgKey:
    slug: str
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-API-Key": self.api_key}


class OrgdeckService(ServerProcess):
    """`python -m service serve` on its own data directory, and the CLI pointed at the same database."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        super().__init__("orgdeck service", [sys.executable, "-m", "service", "serve"], env, log_path)
        self.env = env

    def create_org(self, prefix: str = "bench") -> OrgKey:
        """A new organization with its first key (a fresh slug, so a reused database is fine)."""
        slug = f"{prefix}-{secrets.token_hex(4)}"
        result = subprocess.run(
            [sys.executable, "-m", "service", "create-org", slug],
            cwd=REPO_ROOT,
            env=dict(self.env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise BenchError(f"create-org {slug} failed:\n{result.stderr}")
        created = json.loads(result.stdout)
        return OrgKey(created["orgSlug"], created["apiKey"])


def service_environment(
    data_dir: Path, database_url: str | None, overrides: Mapping[str, str]
) -> dict[str, str]:
    """This shell's environment without its ORGDECK_* settings, plus the bench's and `overrides`."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ORGDECK_")}
    env["ORGDECK_DATA_DIR"] = str(data_dir)
    env["ORGDECK_RATE_LIMIT"] = str(RATE_LIMIT)
    if database_url:
        env["ORGDECK_DATABASE_URL"] = database_url
    env.update(overrides)
    return env


@contextmanager
def scratch_directory() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="orgdeck-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def orgdeck_service(
    workdir: Path,
    *,
    database_url: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "service",
) -> Iterator[OrgdeckService]:
    """Our service as `serve` runs it: on a fresh SQLite file in `workdir`, or on `database_url`."""
    data_dir = workdir / name
    data_dir.mkdir()
    service = OrgdeckService(service_environment(data_dir, database_url, env or {}), workdir / f"{name}.log")
    try:
        service.wait_until_ready("/api/health")
        yield service
    finally:
        service.stop()


@contextmanager
def hello_server(workdir: Path) -> Iterator[ServerProcess]:
    """The bare FastAPI hello app (bench/hello.py), served through the same uvicorn call as `serve`."""
    env = service_environment(workdir, None, {})
    server = ServerProcess("hello app", [sys.executable, "-m", "bench.hello"], env, workdir / "hello.log")
    try:
        server.wait_until_ready("/")
        yield server
    finally:
        server.stop()


@contextmanager
def anchor_server(workdir: Path, service: OrgdeckService) -> Iterator[ServerProcess]:
    """The anchor app (bench/anchor.py) on the service's own database, pinned like the service."""
    database_url = (
        service.env.get("ORGDECK_DATABASE_URL")
        or f"sqlite:///{Path(service.env['ORGDECK_DATA_DIR']) / 'orgdeck.db'}"
    )
    argv = [sys.executable, "-m", "bench.anchor", "--database-url", database_url]
    server = ServerProcess("anchor app", argv, service.env, workdir / "anchor.log")
    try:
        server.wait_until_ready("/docs")
        yield server
    finally:
        server.stop()


# --- Load --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadResult:
    """One wrk run. Latencies in milliseconds; the server's CPU time when it was sampled."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_seconds: float | None = None

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def requests_per_cpu_second(self) -> float | None:
        """What the server does per second of its own CPU: its throughput on a core of its own.

        Unlike requests/s, this hardly moves when other processes share the server's core.
        """
        return self.requests / self.server_cpu_seconds if self.server_cpu_seconds else None

    @property
    def server_busy(self) -> float | None:
        """The share of the run the server spent on a CPU (near 1 when the server is the bottleneck)."""
        return None if self.server_cpu_seconds is None else self.server_cpu_seconds / self.seconds


_DONE = """
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCH_RESULT %d %d %.1f %.1f %d %d %d %d %d\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""
_RESULT = re.compile(
    r"^BENCH_RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) (\d+) (\d+) (\d+) (\d+) (\d+)$", re.MULTILINE
)


def _lua_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def wrk_script(
    *, headers: Mapping[str, str], paths: Sequence[str] | None, method: str, body: str | None
) -> str:
    """A wrk Lua script: the request to send (cycling through `paths` when given) and a parsable summary."""
    lines = [f"wrk.method = {_lua_string(method)}"]
    lines += [f"wrk.headers[{_lua_string(name)}] = {_lua_string(value)}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"wrk.body = {_lua_string(body)}")
    if paths:
        lines.append("local paths = {" + ", ".join(_lua_string(path) for path in paths) + "}")
        lines.append("local next_path = 0")
        lines.append("function request()")
        lines.append("  next_path = next_path % #paths + 1")
        lines.append("  return wrk.format(nil, paths[next_path])")
        lines.append("end")
    return "\n".join(lines) + "\n" + _DONE


def run_wrk(
    url: str,
    *,
    seconds: int,
    connections: int = CONNECTIONS,
    headers: Mapping[str, str] | None = None,
    paths: Sequence[str] | None = None,
    method: str = "GET",
    body: str | None = None,
) -> LoadResult:
    """Drive `url` (or, with `paths`, each path on its origin in turn) from the load core with wrk.

    Any failed request (connection error, timeout, status 4xx/5xx) makes the run a BenchError:
    a throughput of errors measures nothing.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="orgdeck-bench-") as script:
        script.write(wrk_script(headers=headers or {}, paths=paths, method=method, body=body))
        script.flush()
        command = [
            "taskset", "-c", LOAD_CPUS, "wrk", "--latency",
            "-t", "1", "-c", str(connections), "-d", f"{seconds}s",
            "--timeout", f"{REQUEST_TIMEOUT_SECONDS}s", "-s", script.name, url,
        ]  # fmt: skip
        completed = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    match = _RESULT.search(completed.stdout)
    if completed.returncode != 0 or match is None:
        raise BenchError(f"wrk failed on {url}:\n{completed.stdout}\n{completed.stderr}")
    requests, duration_us, p50_us, p99_us, *errors = match.groups()
    failures = dict(zip(("connect", "read", "write", "status", "timeout"), map(int, errors), strict=True))
    if any(failures.values()):
        raise BenchError(f"{url}: requests failed under load {failures}:\n{completed.stdout}")
    if int(requests) == 0:
        raise BenchError(f"{url}: not one request completed in {seconds} s (a stalled server?)")
    return LoadResult(int(requests), int(duration_us) / 1e6, float(p50_us) / 1000, float(p99_us) / 1000)


@dataclass
class Series:
    """The repeated measurements of one target; figures are medians over rounds."""

    label: str
    results: list[LoadResult] = field(default_factory=list)

    @property
    def requests_per_second(self) -> float:
        return statistics.median(r.requests_per_second for r in self.results)

    @property
    def p50_ms(self) -> float:
        return statistics.median(r.p50_ms for r in self.results)

    @property
    def p99_ms(self) -> float:
        return statistics.median(r.p99_ms for r in self.results)

    @property
    def requests_per_cpu_second(self) -> float:
        return _median_or_nan(r.requests_per_cpu_second for r in self.results)

    @property
    def server_busy(self) -> float:
        return _median_or_nan(r.server_busy for r in self.results)

    def spread(self) -> str:
        """The lowest and highest throughput of the rounds."""
        rates = [r.requests_per_second for r in self.results]
        return f"{min(rates):,.0f}-{max(rates):,.0f}"


def _median_or_nan(values: Iterable[float | None]) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else float("nan")


@dataclass(frozen=True)
class Target:
    """Something to measure on a server: a path (or several, requested in turn) with its headers."""

    label: str
    server: ServerProcess
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    paths: Sequence[str] | None = None
    method: str = "GET"
    body: str | None = None

    def run(self, seconds: int, connections: int) -> LoadResult:
        cpu_before = self.server.cpu_seconds()
        result = run_wrk(
            self.server.url(self.path),
            seconds=seconds,
            connections=connections,
            headers=self.headers,
            paths=self.paths,
            method=self.method,
            body=self.body,
        )
        return replace(result, server_cpu_seconds=self.server.cpu_seconds() - cpu_before)


def measure(targets: Sequence[Target], load: LoadSettings, *, progress: bool = True) -> list[Series]:
    """Warm each target up once, then measure them round-robin so that noise falls on all alike."""
    for target in targets:
        if load.warmup_seconds:
            target.run(load.warmup_seconds, load.connections)
    series = [Series(target.label) for target in targets]
    for round_number in range(1, load.rounds + 1):
        for target, results in zip(targets, series, strict=True):
            result = target.run(load.seconds, load.connections)
            results.results.append(result)
            if progress:
                print(
                    f"  round {round_number}/{load.rounds}  {target.label:<36} "
                    f"{result.requests_per_second:>9,.0f} req/s  p50 {result.p50_ms:6.2f} ms  "
                    f"p99 {result.p99_ms:6.2f} ms  server busy {result.server_busy or 0:4.0%}",
                    file=sys.stderr,
                    flush=True,
                )
    return series


# --- Reporting ---------------------------------------------------------------------------------


def ratio(value: float, reference: float) -> float:
    return value / reference if reference else float("nan")


def times(value: float) -> str:
    """A ratio as people write it: 0.87x."""
    return f"{value:.2f}x"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable in a terminal, pasteable into docs/benchmarks.md); numbers right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    numeric = [all(_looks_numeric(row[i]) for row in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _looks_numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "--")


def series_rows(series: Sequence[Series], reference: Series | None = None) -> list[list[str]]:
    """Table rows for measured targets, with ratios against `reference` when given."""
    rows = []
    for s in series:
        row = [
            s.label,
            f"{s.requests_per_second:,.0f}",
            s.spread(),
            f"{s.p50_ms:.2f}",
            f"{s.p99_ms:.2f}",
            f"{s.server_busy:.0%}",
            f"{s.requests_per_cpu_second:,.0f}",
        ]
        if reference is not None:
            row += [
                times(ratio(s.requests_per_second, reference.requests_per_second)),
                times(ratio(s.p99_ms, reference.p99_ms)),
                times(ratio(s.requests_per_cpu_second, reference.requests_per_cpu_second)),
            ]
        rows.append(row)
    return rows


SERIES_HEADERS = ["Target", "req/s", "req/s range", "p50 ms", "p99 ms", "server busy", "req/CPU-s"]
RATIO_HEADERS = ["req/s xref", "p99 xref", "req/CPU-s xref"]
LEGEND = (
    "req/s, p50, p99: medians over the rounds; server busy: the server's CPU time / wall time "
    "(well under 100% means the server waited, or shared its core with other work); "
    "req/CPU-s: requests per second of server CPU, i.e. the rate on a core of its own."
)


def describe_setup(load: LoadSettings, database_url: str | None) -> str:
    database = "PostgreSQL" if database_url and "postgres" in database_url else "SQLite (fresh file)"
    return (
        f"server on core {SERVER_CPUS}, wrk on core {LOAD_CPUS}, {load.connections} connections, "
        f"{load.rounds} x {load.seconds} s per target (median; range over rounds), {database}, "
        f"{os.cpu_count()} CPUs"
    )


# --- Entry point -------------------------------------------------------------------------------

RESULTS = Path(__file__).resolve().parent / "results"


def run(main: Callable[[], int]) -> None:
    """A bench's entry point: runs `main`, keeps what it printed in bench/results/<bench>.<database>.md
    for `python -m bench.readme` to put into docs/benchmarks.md, and ends a BenchError in one line."""
    bench = Path(sys.argv[0]).stem
    database = "postgresql" if any(arg.startswith("--database-url") for arg in sys.argv[1:]) else "sqlite"
    printed = _Tee(sys.stdout)
    try:
        with redirect_stdout(printed):
            status = main()
    except BenchError as error:
        sys.exit(f"bench failed: {error}")
    if status == 0:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{bench}.{database}.md").write_text(printed.text.strip() + "\n")
    sys.exit(status)


class _Tee:
    """Standard output that also keeps what went through it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        # uvicorn asks when it sets up its logging (bench.notifications runs a receiver in process).
        return self.stream.isatty()

    @property
    def text(self) -> str:
        return "".join(self.parts)
