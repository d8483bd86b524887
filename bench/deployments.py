"""Deployment reads at 1,000,000 jobs: the jobs list, the heatmap and the status matrix.

    .venv/bin/python bench/deployments.py                 # fresh SQLite, about six minutes
    .venv/bin/python -m bench.deployments --database-url postgresql://postgres@127.0.0.1:5432/bench

Creates 20 environments (5 of them marked production) and 200 versioned agents through the API,
then seeds at the database level a version of every agent a month over the last two years,
1,000,000 ended jobs over those years deploying each agent's newest version (1 to 3 agents each, a
tenth of them failed or partial), what runs of every agent in every environment with the 4,000
pairs' states, and recounts the rollups the heatmaps and metrics read (`rebuild_rollups`, which
also keeps each version's first arrival in each environment for lead time). Then measures on the
same service, next to the authenticated baseline GET /api/api-keys?orgSlug=:

- the jobs list filtered by `status` and `environmentId` (reach: median ≤ 2x the baseline's),
- the heatmap of the last 365 days by day, every environment (reach: median ≤ 3x), and the
  same by week,
- the delivery metrics of the last 365 days by month, lead time included (reach: median ≤ 3x),
- the agent x environment heatmap of the last 90 days (reach: median ≤ 3x),
- the status matrix as the console first asks for it (reach: median ≤ 3x; n/a without the route).

Then times single requests, with no other load, of the weekday-by-hour heatmap, the metrics by
week, and the jobs lists the console opens from a heatmap cell (one environment, one day) and from
the Overview (failed jobs of the last 7 days); and, since analytics answers are kept until a job
ends, the year's metrics and the agent heatmap asked for ranges not asked for before (what a
request costs right after a job ended). Last, the lead-time figures: the arrivals kept, the year's
median lead time, and what reading the production arrivals and their exact medians costs alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from sqlalchemy import JSON, func, insert, select

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import service.models  # noqa: F401  (every table mapped, for the bulk inserts' foreign keys)
from api.deployments import AgentStatus, FieldChange
from bench.common import (
    OrgdeckService,
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
from bench.notifications import open_database, org_id_of
from service.agents.models import AgentRow, AgentVersionRow
from service.deployments import leadtime
from service.deployments.models import (
    AgentDeploymentRow,
    DeploymentArrivalRow,
    DeploymentJobAgentRow,
    DeploymentJobRow,
    DeploymentStateRow,
)
from service.deployments.ranges import period_starts
from service.deployments.rollups import rebuild_rollups
from service.storage.db import Database, utcnow
from service.storage.ids import new_id

JOBS = 1_000_000
ENVIRONMENTS = 20
# Every fourth environment counts as production for lead time.
PRODUCTION_EVERY = 4
AGENTS = 200
SPAN_DAYS = 730
VERSIONS = 24  # per agent, one a month over the span; a job deploys each agent's newest
# Job outcomes; a partial job has two or three agents, the first of which failed.
OUTCOMES = {"complete": 0.9, "error": 0.06, "partial": 0.04}
PAIR_STATES = {"in_sync": 0.85, "stale": 0.05, "drifted": 0.05, "error": 0.05}
SEED_BATCH = 20_000
CONFIG_HASH = "0" * 64
CREATE_THREADS = 4
# Distinct paths each target cycles through, so no one query stays hot.
PATHS_PER_TARGET = 20
HEATMAP_DAYS = 365
REACH = {
    "jobs": 2.0,
    "heatmap": 3.0,
    "heatmap_week": 3.0,
    "metrics": 3.0,
    "agent_heatmap": 3.0,
    "status": 3.0,
}
SINGLE_REQUESTS = 3


# --- Seeding -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Catalogue:
    org_id: str
    environment_ids: list[str]
    agents: list[tuple[str, str]]  # (id, stableKey)


def create_catalogue(base_url: str, org: OrgKey, db: Database) -> Catalogue:
    """Environments and agents with a version each, made through the API as a pipeline would."""
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=60) as http:

        def environment(index: int) -> str:
            answer = http.post("/api/environments", json={"orgSlug": org.slug, "name": f"env-{index:02d}"})
            answer.raise_for_status()
            environment_id = answer.json()["id"]
            if index % PRODUCTION_EVERY == PRODUCTION_EVERY - 1:
                body = {"orgSlug": org.slug, "production": True}
                http.patch(f"/api/environments/{environment_id}", json=body).raise_for_status()
            return environment_id

        def agent(index: int) -> None:
            key = f"agent-{index:03d}"
            body = {"orgSlug": org.slug, "stableKey": key, "provider": "openai"}
            http.post("/api/agents", json=body).raise_for_status()
            http.post(f"/api/agents/{key}/versions", json={"orgSlug": org.slug}).raise_for_status()

        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            environment_ids = list(pool.map(environment, range(ENVIRONMENTS)))
            list(pool.map(agent, range(AGENTS)))
    org_id = org_id_of(db, org.slug)
    with db.session() as session:
        query = (
            select(AgentRow.id, AgentRow.stable_key)
            .where(AgentRow.org_id == org_id)
            .order_by(AgentRow.stable_key)
        )
        agents = [(agent_id, key) for agent_id, key in session.execute(query)]
    return Catalogue(org_id, environment_ids, agents)


Rows = dict[str, list[dict[str, Any]]]


def job_batches(catalogue: Catalogue, now: datetime, jobs: int) -> Iterator[Rows]:
    """`jobs` ended jobs, oldest first and evenly spread over SPAN_DAYS, with their agents' results."""
    rng = random.Random(2026)
    outcomes, weights = list(OUTCOMES), list(OUTCOMES.values())
    step = timedelta(days=SPAN_DAYS) / jobs
    start = now - timedelta(days=SPAN_DAYS)
    batch: Rows = {"jobs": [], "agents": []}
    for index in range(jobs):
        created = start + step * (index + rng.random())
        status = rng.choices(outcomes, weights)[0]
        agents = rng.sample(catalogue.agents, rng.randint(2, 3) if status == "partial" else rng.randint(1, 3))
        started = created + timedelta(seconds=rng.uniform(1, 30))
        job_id = new_id("job", at=created)
        version = version_at(created, start)
        batch["jobs"].append(
            {
                "id": job_id,
                "org_id": catalogue.org_id,
                "environment_id": catalogue.environment_ids[index % ENVIRONMENTS],
                "status": status,
                "message": None,
                "attempts": 1,
                "lease_token": None,
                "lease_expires_at": None,
                "created_at": created,
                "started_at": started,
                "finished_at": started + timedelta(seconds=rng.uniform(5, 600)),
            }
        )
        for position, (agent_id, key) in enumerate(agents):
            failed = status == "error" or (status == "partial" and position == 0)
            batch["agents"].append(
                {
                    "job_id": job_id,
                    "agent_id": agent_id,
                    "stable_key": key,
                    "version": version,
                    "config": {},
                    "config_hash": CONFIG_HASH,
                    "status": "error" if failed else "complete",
                    "error": "The target answered HTTP 503" if failed else None,
                }
            )
        if len(batch["jobs"]) == SEED_BATCH:
            yield batch
            batch = {"jobs": [], "agents": []}
    if batch["jobs"]:
        yield batch


def version_at(moment: datetime, start: datetime) -> int:
    """The number of every agent's newest version at `moment`: one a month from `start`."""
    return min(int((moment - start) / (timedelta(days=SPAN_DAYS) / VERSIONS)) + 1, VERSIONS)


def version_rows(db: Database, catalogue: Catalogue, now: datetime) -> Rows:
    """Versions 2 to VERSIONS of every agent, copies of its first, which is dated to the span's
    start like them: one a month."""
    start = now - timedelta(days=SPAN_DAYS)
    step = timedelta(days=SPAN_DAYS) / VERSIONS
    with db.session(write=True) as session:
        firsts = session.scalars(
            select(AgentVersionRow).where(AgentVersionRow.agent_id.in_([a for a, _ in catalogue.agents]))
        ).all()
        for first in firsts:
            first.created_at = start
        agents = session.scalars(select(AgentRow).where(AgentRow.org_id == catalogue.org_id)).all()
        for agent in agents:
            agent.latest_version = VERSIONS
    return {
        "versions": [
            {
                "id": new_id("agv", at=start + step * (number - 1)),
                "agent_id": first.agent_id,
                "number": number,
                "content_hash": f"{number:064d}",
                "snapshot": first.snapshot,
                "created_at": start + step * (number - 1),
            }
            for first in firsts
            for number in range(2, VERSIONS + 1)
        ]
    }


def pair_rows(catalogue: Catalogue, now: datetime) -> Rows:
    """What runs of every agent in every environment, and each pair's state with its status cell."""
    rng = random.Random(7)
    states, weights = list(PAIR_STATES), list(PAIR_STATES.values())
    drift = [FieldChange(field="draft.providerConfig.temperature", kind="changed", before=0.2, after=0.7)]
    deployed, pairs = [], []
    for environment_id in catalogue.environment_ids:
        for agent_id, key in catalogue.agents:
            since = now - timedelta(days=rng.uniform(0, 60))
            state = rng.choices(states, weights)[0]
            job_id = new_id("job", at=since)
            error = "The target answered HTTP 503" if state == "error" else None
            deployed.append(
                {
                    "id": new_id("dep", at=since),
                    "org_id": catalogue.org_id,
                    "environment_id": environment_id,
                    "agent_id": agent_id,
                    "version": VERSIONS,
                    "config": {},
                    "config_hash": CONFIG_HASH,
                    "job_id": job_id,
                    "deployed_at": since,
                }
            )
            status = AgentStatus(
                stable_key=key,
                agent_name=key,
                environment_id=environment_id,
                state=state,
                deployed_version=VERSIONS,
                latest_version=VERSIONS,
                deployed_at=since,
                last_job_id=job_id,
                since=since,
                drift=drift if state == "drifted" else [],
                error=error,
            )
            pairs.append(
                {
                    "agent_id": agent_id,
                    "environment_id": environment_id,
                    "org_id": catalogue.org_id,
                    "state": state,
                    "since": since,
                    "tool_hashes": {},
                    "error": error,
                    "last_job_id": job_id,
                    "check_at": None,
                    "cell": status.model_dump_json(),
                }
            )
    return {"deployed": deployed, "pairs": pairs}


ROLLUP_TABLES = ("deployment_month_rollups", "deployment_hourly_rollups", "deployment_arrivals")
MODELS = {
    "versions": AgentVersionRow,
    "jobs": DeploymentJobRow,
    "agents": DeploymentJobAgentRow,
    "deployed": AgentDeploymentRow,
    "pairs": DeploymentStateRow,
}


def seed(db: Database, catalogue: Catalogue, jobs: int) -> None:
    """Write the jobs and the pairs in one transaction (executemany on SQLite, COPY on PostgreSQL),
    then recount the rollups."""
    started = time.monotonic()
    now = utcnow()
    batches = itertools.chain(
        [version_rows(db, catalogue, now)], job_batches(catalogue, now, jobs), [pair_rows(catalogue, now)]
    )
    if db.is_sqlite:
        with db.session(write=True) as session:
            for batch in batches:
                for name, rows in batch.items():
                    session.execute(insert(MODELS[name]), rows)
    else:
        copy_rows(db, batches)
    written = time.monotonic()
    with db.session(write=True) as session:
        rebuild_rollups(session, org_id=catalogue.org_id)
    analyze(db)
    print(
        f"Seeded {jobs:,} jobs in {written - started:.1f} s, rebuilt the rollups in "
        f"{time.monotonic() - written:.1f} s",
        file=sys.stderr,
    )


def copy_rows(db: Database, batches: Iterable[Rows], models: dict[str, Any] = MODELS) -> None:
    """PostgreSQL's COPY, a statement per table and batch, all in one transaction."""
    raw = db.engine.raw_connection()
    try:
        with raw.cursor() as cursor:
            for batch in batches:
                for name, rows in batch.items():
                    table = models[name].__table__
                    columns = list(rows[0])
                    as_json = {column.name for column in table.columns if isinstance(column.type, JSON)}
                    with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                        for row in rows:
                            copy.write_row([json.dumps(row[c]) if c in as_json else row[c] for c in columns])
        raw.commit()
    finally:
        raw.close()


def analyze(db: Database) -> None:
    """What autovacuum does to tables this size soon after: statistics and, on PostgreSQL, the
    visibility map (without which it cannot read an index alone)."""
    if db.is_sqlite:
        return
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table in [model.__tablename__ for model in MODELS.values()] + list(ROLLUP_TABLES):
            connection.exec_driver_sql(f"VACUUM ANALYZE {table}")


# --- Targets -----------------------------------------------------------------------------------


def path(route: str, org: OrgKey, **query: str) -> str:
    return f"/api/{route}?" + urlencode({"orgSlug": org.slug, **query})


def jobs_paths(org: OrgKey, catalogue: Catalogue) -> list[str]:
    """Each environment's failed jobs, newest first (the default page of 20)."""
    return [
        path("agents/deployment-jobs", org, status="error", environmentId=environment_id)
        for environment_id in catalogue.environment_ids[:PATHS_PER_TARGET]
    ]


def heatmap_paths(
    org: OrgKey, route: str = "agents/deployments/heatmap", days: int = HEATMAP_DAYS, **query: str
) -> list[str]:
    """The last `days` days, ending on each of the last PATHS_PER_TARGET days."""
    today = utcnow().date()
    ends = [today - timedelta(days=back) for back in range(PATHS_PER_TARGET)]
    return [
        path(route, org, start=(end - timedelta(days=days - 1)).isoformat(), end=end.isoformat(), **query)
        for end in ends
    ]


def cycling(label: str, service: OrgdeckService, org: OrgKey, paths: list[str]) -> Target:
    return Target(label, service, paths[0], org.headers, paths)


def prime(base_url: str, org: OrgKey, targets: Sequence[Target]) -> None:
    """Ask for every path once, one at a time: freshly seeded tables are cold, and 32 connections
    of first requests can outlast a warm-up in which wrk must see one answer."""
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=300) as http:
        for target in targets:
            for route in target.paths or [target.path]:
                http.get(route).raise_for_status()


def single_requests(base_url: str, org: OrgKey, catalogue: Catalogue) -> list[list[str]]:
    """Median and worst of SINGLE_REQUESTS sequential calls of each analytics request, and of the
    jobs lists the console opens from a heatmap cell and from the Overview. The analytics answers
    are kept until the rollups change (service.deployments.analytics_cache): the "first ask" rows ask for
    ranges nothing asked for before, one per call, to show what making an answer costs."""
    today = utcnow().date()
    quarter = {"start": (today - timedelta(days=89)).isoformat(), "end": today.isoformat()}
    year = {"start": (today - timedelta(days=HEATMAP_DAYS - 1)).isoformat(), "end": today.isoformat()}
    a_year_ago = (today - timedelta(days=HEATMAP_DAYS - 1)).isoformat()
    week = {"start": (today - timedelta(days=6)).isoformat(), "end": today.isoformat()}
    environment = catalogue.environment_ids[0]
    # Ranges ending before any the load asked for: each of these calls makes its answer.
    unasked = range(PATHS_PER_TARGET, PATHS_PER_TARGET + SINGLE_REQUESTS)

    def ending(back: int, days: int) -> dict[str, str]:
        end = today - timedelta(days=back)
        return {"start": (end - timedelta(days=days - 1)).isoformat(), "end": end.isoformat()}

    calls = [
        (
            "jobs, one environment on a day a year ago",
            [
                path(
                    "agents/deployment-jobs", org, environmentId=environment, start=a_year_ago, end=a_year_ago
                )
            ],
        ),
        (
            "jobs, failed in the last 7 days, every environment",
            [path("agents/deployment-jobs", org, status="error,partial", **week)],
        ),
        (
            "jobs, failed on a day a year ago, every environment",
            [path("agents/deployment-jobs", org, status="error,partial", start=a_year_ago, end=a_year_ago)],
        ),
        (
            "heatmap, 365 days weekday x hour",
            [path("agents/deployments/heatmap", org, groupBy="weekday_hour", **year)],
        ),
        ("metrics, 90 days by week", [path("agents/deployments/metrics", org, period="week", **quarter)]),
        (
            "metrics, 365 days by month, first ask",
            [
                path("agents/deployments/metrics", org, period="month", **ending(back, 365))
                for back in unasked
            ],
        ),
        (
            "heatmap, 90 days agent x environment, first ask",
            [
                path("agents/deployments/heatmap", org, groupBy="agent", **ending(back, 90))
                for back in unasked
            ],
        ),
    ]
    rows = []
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=300) as http:
        for label, routes in calls:
            elapsed = []
            for route in itertools.islice(itertools.cycle(routes), SINGLE_REQUESTS):
                began = time.perf_counter()
                http.get(route).raise_for_status()
                elapsed.append((time.perf_counter() - began) * 1000)
            rows.append([label, f"{statistics.median(elapsed):.1f}", f"{max(elapsed):.1f}"])
    return rows


def lead_time_rows(db: Database, base_url: str, org: OrgKey, catalogue: Catalogue) -> list[list[str]]:
    """The arrivals kept, the year's median lead time as the route answers it, and what reading the
    production arrivals and their exact medians costs on its own (the part of a first ask that is
    lead time's), timed here in one process, median of SINGLE_REQUESTS."""
    today = utcnow().date()
    start = today - timedelta(days=HEATMAP_DAYS - 1)
    year = {"start": start.isoformat(), "end": today.isoformat()}
    with httpx.Client(base_url=base_url, headers=org.headers, timeout=300) as http:
        answer = http.get(path("agents/deployments/metrics", org, period="month", **year))
        answer.raise_for_status()
    median = answer.json()["totals"]["leadTime"]
    firsts = period_starts(start, today, "month")
    elapsed = []
    model = DeploymentArrivalRow
    with db.session() as session:
        production = leadtime.production_environments(session, org_id=catalogue.org_id)
        for _ in range(SINGLE_REQUESTS):
            began = time.perf_counter()
            leadtime.median_lead_times(
                session,
                org_id=catalogue.org_id,
                production=leadtime.production_environments(session, org_id=catalogue.org_id),
                environments=catalogue.environment_ids,
                firsts=firsts,
                start=start,
                end=today,
            )
            elapsed.append((time.perf_counter() - began) * 1000)
        kept = session.scalar(select(func.count()).where(model.org_id == catalogue.org_id))
        since = datetime.combine(start, datetime.min.time(), UTC)
        in_range = session.scalar(
            select(func.count()).where(
                model.org_id == catalogue.org_id,
                model.environment_id.in_(production),
                model.reached_at >= since,
            )
        )
    return [
        ["arrivals kept (versions x environments reached)", f"{kept:,}"],
        [f"of them in the {len(production)} production environments, in the range", f"{in_range:,}"],
        [f"median lead time, {HEATMAP_DAYS} days", f"{median / 3600:.2f} h" if median else "none"],
        ["reading those arrivals and their medians alone, ms", f"{statistics.median(elapsed):.1f}"],
    ]


# --- Reporting ---------------------------------------------------------------------------------


def load_rows(baseline: Series, measured: Sequence[tuple[str, Series | None]]) -> list[list[str]]:
    rows = [[baseline.label, *figures(baseline), "1.00x", "1.00x", "", ""]]
    for key, series in measured:
        if series is None:
            rows.append([LABELS[key], "n/a", "n/a", "n/a", "n/a", "n/a", f"≤ {times(REACH[key])}", "n/a"])
            continue
        median = ratio(series.p50_ms, baseline.p50_ms)
        rows.append(
            [
                series.label,
                *figures(series),
                times(median),
                times(ratio(series.p99_ms, baseline.p99_ms)),
                f"≤ {times(REACH[key])}",
                "reached" if median <= REACH[key] else "NOT reached",
            ]
        )
    return rows


def figures(series: Series) -> list[str]:
    return [f"{series.requests_per_second:,.0f}", f"{series.p50_ms:.2f}", f"{series.p99_ms:.2f}"]


LABELS = {
    "jobs": "jobs, status + environmentId",
    "heatmap": f"heatmap, {HEATMAP_DAYS} days x environments",
    "heatmap_week": f"heatmap, {HEATMAP_DAYS} days by week x environments",
    "metrics": f"metrics, {HEATMAP_DAYS} days by month",
    "agent_heatmap": "heatmap, 90 days agent x environment",
    "status": "status matrix (default page)",
}
LOAD_HEADERS = ["Target", "req/s", "p50 ms", "p99 ms", "p50 / baseline", "p99 / baseline", "reach (p50)", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/deployments.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--jobs", type=int, default=JOBS, help="jobs to seed (default %(default)s)")
    args = parser.parse_args(argv)
    load = load_settings(args)
    print(f"Deployment reads: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with scratch_directory() as workdir, orgdeck_service(workdir, database_url=args.database_url) as service:
        org = service.create_org()
        db = open_database(service)
        try:
            catalogue = create_catalogue(service.origin, org, db)
            seed(db, catalogue, args.jobs)
        finally:
            db.dispose()
        baseline = Target("GET /api/api-keys?orgSlug= (key)", service, path("api-keys", org), org.headers)
        jobs = cycling(LABELS["jobs"], service, org, jobs_paths(org, catalogue))
        heatmap = cycling(LABELS["heatmap"], service, org, heatmap_paths(org))
        by_week = cycling(LABELS["heatmap_week"], service, org, heatmap_paths(org, bucket="week"))
        metrics = cycling(
            LABELS["metrics"], service, org, heatmap_paths(org, "agents/deployments/metrics", period="month")
        )
        by_agent = cycling(
            LABELS["agent_heatmap"], service, org, heatmap_paths(org, days=90, groupBy="agent")
        )
        loaded = {
            "baseline": baseline,
            "jobs": jobs,
            "heatmap": heatmap,
            "heatmap_week": by_week,
            "metrics": metrics,
        }
        prime(service.origin, org, [*loaded.values(), by_agent])
        series = dict(zip(loaded, measure(list(loaded.values()), load), strict=True))
        singles = single_requests(service.origin, org, catalogue)
        db = open_database(service)
        try:
            lead_times = lead_time_rows(db, service.origin, org, catalogue)
        finally:
            db.dispose()
        # The slowest last, each in rounds of its own: a target this much slower still has queued
        # requests running into whatever is measured after it.
        (series["agent_heatmap"],) = measure([by_agent], load)
        status = Target(LABELS["status"], service, path("agents/deployments/status", org), org.headers)
        prime(service.origin, org, [status])  # answered once the agent heatmap's backlog has drained
        (series["status"],) = measure([status], load)
    print()
    print(
        f"{describe_setup(load, args.database_url)}; {args.jobs:,} jobs over {SPAN_DAYS} days, "
        f"{ENVIRONMENTS} environments, {AGENTS} agents; ratios against the authenticated baseline"
    )
    print()
    measured = [(key, series.get(key)) for key in LABELS]
    print(format_table(LOAD_HEADERS, load_rows(series["baseline"], measured)))
    print()
    print("Single requests, one at a time (no other load):")
    print()
    print(format_table(["Request", "median ms", "worst ms"], singles))
    print()
    print("Lead time for changes (kept at job end, read for the production environments):")
    print()
    print(format_table(["Lead time", ""], lead_times))
    return 0


if __name__ == "__main__":
    run(main)
