"""Demo deployments: what runs where now, and the quarter of jobs behind it.

`seed_deployments` deploys through the client as a pipeline would: every demo agent into the
environments it belongs in (by fleet in development). The demo agents whose drafts hold unversioned
edits show as drifted wherever they run.

The ninety days before cannot be made through the API, which stamps every job with the present, so
`seed_deployment_history` writes them into the database, once, as ended jobs: more on weekdays in
working hours, more as the quarter goes on, failures now and then followed by a fix, and a bad week
in production. It dates the agents' versions to match. Three pairs get their present from this
history rather than from the client: two agents production has kept on an older version since
before their newest one appeared (stale), and one whose last deployment failed (error). Then it
recounts the rollups the heatmaps read and re-evaluates the agents' states.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from api import OrgdeckClient
from api.deployments import DeploymentRequest
from service.agents.demo import DEMO_AGENTS, DEMO_FLEETS
from service.agents.models import AgentRow, AgentVersionRow
from service.deployments.models import AgentDeploymentRow, DeploymentJobAgentRow, DeploymentJobRow
from service.deployments.rollups import rebuild_rollups
from service.deployments.service import config_hash, resolved_config
from service.deployments.states import record_job_outcome, refresh_agent
from service.environments.models import EnvironmentRow
from service.orgs.service import get_org
from service.storage.db import Database, utcnow
from service.storage.ids import new_id

logger = logging.getLogger("orgdeck.demo")

EVERY_AGENT = tuple(agent.stable_key for agent in DEMO_AGENTS)
EXPERIMENT = "sales-email-drafter"
# What runs where: every agent in development, all but the experiment in staging and production,
# the customer-facing agents in the EU.
PLACEMENT = {
    "development": EVERY_AGENT,
    "staging": tuple(key for key in EVERY_AGENT if key != EXPERIMENT),
    "production": tuple(key for key in EVERY_AGENT if key != EXPERIMENT),
    "eu-production": (
        "escalation-router",
        "invoice-explainer",
        "kb-answerer",
        "refund-assistant",
        "support-triage",
    ),
}
# Production keeps these on an older version (stableKey: version), last deployed LAST_DEPLOYED_DAYS
# ago; their newest version appeared NEWEST_WAITING_DAYS ago, past the default stale threshold.
HELD_BACK = {"code-reviewer": 2, "release-notes-writer": 1}
NEWEST_WAITING_DAYS = {"code-reviewer": 12, "release-notes-writer": 9}
LAST_DEPLOYED_DAYS_AGO = 16
# A pair whose last deployment, hours ago, failed; it last deployed fine a few days before.
FAILING = ("eu-production", "escalation-router")
FAILING_ERROR = "Secret SLACK_WEBHOOK_URL is not set in this environment"
# Pairs whose present the history writes; the client leaves them alone.
HISTORY_OWNED = {("production", key) for key in HELD_BACK} | {FAILING}

HISTORY_DAYS = 90


@dataclass(frozen=True)
class Pace:
    """How an environment is deployed to: jobs per working day at the end of the quarter, the share
    that fails, how many agents a job carries at most, and how many days a version takes to get there."""

    jobs_per_day: float
    failure_rate: float
    max_agents: int
    lag_days: int


PACES = {
    "development": Pace(16, 0.10, 2, 0),
    "staging": Pace(8, 0.06, 4, 1),
    "production": Pace(5, 0.035, 4, 3),
    "eu-production": Pace(3, 0.035, 3, 4),
}
WEEKEND_SHARE = 0.1
# Jobs per UTC hour of a working day, relative: mornings and afternoons, a lunch dip, a thin night.
HOUR_WEIGHTS = (
    0.2,
    0.1,
    0.1,
    0.1,
    0.1,
    0.2,
    0.5,
    1.5,
    4,
    7,
    8,
    7.5,
    4.5,
    6.5,
    8,
    7.5,
    6,
    4,
    2.5,
    1.5,
    1,
    0.7,
    0.4,
    0.3,
)
# Production's bad week, from the Monday about this many days ago: a provider outage during rollouts.
BAD_WEEK_ENVIRONMENT = "production"
BAD_WEEK_DAYS_AGO = 45
BAD_WEEK_FAILURE_RATE = 0.45
FAILURES = (
    "Health check failed: 3 of 20 evaluation prompts over the latency budget",
    "Secret ZENDESK_TOKEN is not set in this environment",
    "Prompt reference demo/support-prompts/escalation@staging has no version labelled staging",
    "The provider rate-limited the warm-up calls (HTTP 429)",
    "Tool stripe.refund is not deployed in this environment",
)
BAD_WEEK_FAILURES = (
    "The provider answered HTTP 503 during the rollout health check",
    "Timed out after 300 s waiting for the health check",
)
MAX_FIXES = 6


def seed_deployments(client: OrgdeckClient) -> None:
    """Deploy the demo agents where they belong, once; the worker runs the jobs."""
    if client.deployments.jobs(limit=1).items:
        return
    environments = {e.name: e.id for e in client.environments.list(limit=1000).items}
    fleets = {f.name: f.id for f in client.fleets.list(limit=1000).items}
    for name in DEMO_FLEETS:
        client.deployments.deploy_fleet(fleets[name], environments["development"])
    client.deployments.deploy(environments["development"], [EXPERIMENT])
    for name in ("staging", "production", "eu-production"):
        keys = [key for key in PLACEMENT[name] if (name, key) not in HISTORY_OWNED]
        client.deployments.deploy(environments[name], keys)


# -- the quarter before ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DatedVersion:
    number: int
    created_at: datetime
    config: dict[str, Any]
    config_hash: str


@dataclass
class History:
    """The history being written: what it refers to, the rows so far (plain values, inserted in bulk:
    thousands of ORM objects took seconds of the demo's start), the dice."""

    org_id: str
    environments: dict[str, str]
    agents: dict[str, AgentRow]
    # Per stableKey, its versions oldest first, with the config each deploys.
    versions: dict[str, list[DatedVersion]]
    bad_week: tuple[datetime, datetime]
    # When the history-owned pairs' own last jobs begin: no other job deploys them from then on.
    closed: dict[tuple[str, str], datetime]
    until: datetime
    rng: random.Random
    jobs: list[dict[str, Any]] = field(default_factory=list)
    job_agents: list[dict[str, Any]] = field(default_factory=list)


def seed_deployment_history(db: Database, *, org_slug: str) -> None:
    """Ninety days of ended deployment jobs of the demo agents, written once."""
    with db.session(write=True) as session:
        org = get_org(session, slug=org_slug)
        now = utcnow()
        if org is None or _has_history(session, org_id=org.id, before=now - timedelta(days=1)):
            return
        # A worker ending one of the org's jobs while the rollups are recounted would count it twice
        # or collide with the recount: it waits for these locks (PostgreSQL; SQLite has one writer).
        open_jobs = DeploymentJobRow.org_id == org.id, DeploymentJobRow.status.in_(["pending", "running"])
        session.execute(select(DeploymentJobRow.id).where(*open_jobs).with_for_update())
        query = select(EnvironmentRow).where(
            EnvironmentRow.org_id == org.id, EnvironmentRow.name.in_(list(PACES))
        )
        environments = {environment.name: environment for environment in session.scalars(query)}
        query = select(AgentRow).where(AgentRow.org_id == org.id, AgentRow.stable_key.in_(EVERY_AGENT))
        agents = {agent.stable_key: agent for agent in session.scalars(query)}
        if set(environments) != set(PACES) or set(agents) != set(EVERY_AGENT):
            return
        first_day = datetime.combine(now.date(), datetime.min.time(), tzinfo=UTC) - timedelta(
            days=HISTORY_DAYS - 1
        )
        for environment in environments.values():
            # The environments existed before anything was deployed to them.
            environment.created_at = min(environment.created_at, first_day - timedelta(days=14))
        bad_start = first_day + timedelta(days=HISTORY_DAYS - 1 - BAD_WEEK_DAYS_AGO)
        bad_start -= timedelta(days=bad_start.weekday())
        finals = _final_times(now)
        history = History(
            org_id=org.id,
            environments={name: environment.id for name, environment in environments.items()},
            agents=agents,
            versions=_date_versions(session, org_slug=org.slug, agents=agents, first_day=first_day, now=now),
            bad_week=(bad_start, bad_start + timedelta(days=5)),
            closed={pair: times[0] for pair, times in finals.items()},
            until=now - timedelta(hours=1),
            rng=random.Random(HISTORY_DAYS),
        )
        for day in (first_day + timedelta(days=n) for n in range(HISTORY_DAYS)):
            _day_of_jobs(history, day, progress=(day - first_day).days / (HISTORY_DAYS - 1))
        owned = {pair: _final_jobs(history, pair, times) for pair, times in finals.items()}
        # The tables', not the models': one executemany each, where ORM bulk inserts split the rows
        # into a batch wherever the next one leaves other columns empty.
        session.execute(insert(DeploymentJobRow.__table__), history.jobs)
        session.execute(insert(DeploymentJobAgentRow.__table__), history.job_agents)
        for jobs in owned.values():
            _take_present_from(session, jobs)
        rebuild_rollups(session, org_id=org.id)
        # The versions were dated afresh: every pair of the agents is evaluated again.
        for agent in agents.values():
            refresh_agent(session, agent_id=agent.id)
    logger.info("Wrote %d demo deployment jobs of the last %d days", len(history.jobs), HISTORY_DAYS)


def _has_history(session: Session, *, org_id: str, before: datetime) -> bool:
    """Whether the org's jobs go back further than `before`, which only a written history does."""
    query = select(DeploymentJobRow.id).where(
        DeploymentJobRow.org_id == org_id, DeploymentJobRow.created_at < before
    )
    return session.scalar(query.limit(1)) is not None


def _final_times(now: datetime) -> dict[tuple[str, str], list[datetime]]:
    """When each history-owned pair was last deployed: a success, then for the failing pair a failure."""
    midday = datetime.combine(now.date(), datetime.min.time(), tzinfo=UTC) + timedelta(hours=11)
    times = {("production", key): [midday - timedelta(days=LAST_DEPLOYED_DAYS_AGO)] for key in HELD_BACK}
    times[FAILING] = [midday - timedelta(days=6), now - timedelta(hours=3)]
    return times


def _date_versions(
    session: Session, *, org_slug: str, agents: dict[str, AgentRow], first_day: datetime, now: datetime
) -> dict[str, list[DatedVersion]]:
    """Date each agent's versions over the quarter (the first before it), and the agent before them.

    A held-back agent's newest version is dated NEWEST_WAITING_DAYS ago: long enough to be stale.
    """
    query = select(AgentVersionRow).where(AgentVersionRow.agent_id.in_([a.id for a in agents.values()]))
    by_agent: dict[str, list[AgentVersionRow]] = {}
    for version in session.scalars(query.order_by(AgentVersionRow.number)):
        by_agent.setdefault(version.agent_id, []).append(version)
    dated = {}
    for stable_key, agent in agents.items():
        versions = by_agent.get(agent.id, [])
        # The first version precedes the quarter; the others spread over its weeks, oldest first.
        days_ago = [HISTORY_DAYS + 10] + [
            70 - 55 * i / max(len(versions) - 2, 1) for i in range(len(versions) - 1)
        ]
        if stable_key in NEWEST_WAITING_DAYS and len(versions) > 1:
            days_ago[-1] = NEWEST_WAITING_DAYS[stable_key]
        request = DeploymentRequest(org_slug=org_slug, environment_id="demo", agent_stable_keys=[stable_key])
        dated[stable_key] = []
        for version, ago in zip(versions, days_ago, strict=True):
            version.created_at = min(version.created_at, now - timedelta(days=ago, hours=3))
            config = resolved_config(version.snapshot, request)
            dated[stable_key].append(
                DatedVersion(version.number, version.created_at, config, config_hash(config))
            )
        agent.created_at = min(agent.created_at, first_day - timedelta(days=HISTORY_DAYS + 12))
    return dated


def _day_of_jobs(history: History, day: datetime, *, progress: float) -> None:
    """A day's jobs in every environment: fewer at weekends, more as the quarter goes on."""
    rng = history.rng
    growth = 0.6 + 0.6 * progress
    for name, pace in PACES.items():
        rate = pace.jobs_per_day * growth * (WEEKEND_SHARE if day.weekday() >= 5 else 1)
        for _ in range(_poisson(rng, rate)):
            hour = rng.choices(range(24), weights=HOUR_WEIGHTS)[0]
            at = day + timedelta(hours=hour, seconds=rng.uniform(0, 3600))
            keys = rng.sample(PLACEMENT[name], k=rng.randint(1, pace.max_agents))
            # Teams get better at it: failures fall over the quarter.
            _job(history, name, at, keys, failure_rate=pace.failure_rate * (1.4 - 0.7 * progress))


def _poisson(rng: random.Random, rate: float) -> int:
    """A Poisson-distributed count (Knuth's method; rates here are small)."""
    threshold, count, product = math.exp(-rate), 0, rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count


def _job(
    history: History, environment: str, at: datetime, keys: list[str], *, failure_rate: float, fixes: int = 0
) -> None:
    """A job that may fail; a failed one is followed by a fix of the same agents, sooner or later."""
    keys = [key for key in keys if at < history.closed.get((environment, key), history.until)]
    if not keys or at >= history.until:
        return
    rng = history.rng
    bad = environment == BAD_WEEK_ENVIRONMENT and history.bad_week[0] <= at < history.bad_week[1]
    failed: list[str] = []
    if rng.random() < (BAD_WEEK_FAILURE_RATE if bad else failure_rate):
        whole = len(keys) == 1 or rng.random() < 0.4
        failed = keys if whole else rng.sample(keys, k=rng.randint(1, len(keys) - 1))
    reasons = BAD_WEEK_FAILURES if bad else FAILURES
    errors = {key: rng.choice(reasons) for key in failed}
    _add_job(history, environment, at, keys, errors, slow=3 if bad else 1)
    if failed and fixes < MAX_FIXES:
        # Someone fixes forward: within the hour usually, over hours while the provider is down.
        later = at + timedelta(minutes=rng.lognormvariate(math.log(240 if bad else 35), 0.7))
        _job(history, environment, later, keys, failure_rate=failure_rate, fixes=fixes + 1)


def _final_jobs(history: History, pair: tuple[str, str], times: list[datetime]) -> list[dict[str, Any]]:
    """A history-owned pair's own last jobs, one agent each: the last a failure for the failing pair."""
    environment, key = pair
    jobs = []
    for at in times:
        errors = {key: FAILING_ERROR} if pair == FAILING and at == times[-1] else {}
        jobs.append(_add_job(history, environment, at, [key], errors, slow=1))
    return jobs


def _add_job(
    history: History, environment: str, at: datetime, keys: list[str], errors: dict[str, str], *, slow: float
) -> dict[str, Any]:
    """An ended job of `keys` in which the agents named in `errors` failed."""
    rng = history.rng
    started = at + timedelta(seconds=rng.uniform(0.5, 8))
    seconds = (sum(rng.uniform(6, 25) for _ in keys) + rng.uniform(4, 15)) * slow * (1.6 if errors else 1)
    job_id = new_id("job", at=at)
    rows = [_agent_row(history, job_id, environment, key, at, errors.get(key)) for key in keys]
    failed = [row for row in rows if row["error"]]
    status = "complete" if not failed else "error" if len(failed) == len(rows) else "partial"
    job = {
        "id": job_id,
        "org_id": history.org_id,
        "environment_id": history.environments[environment],
        "status": status,
        "message": _message(rows),
        "attempts": 1,
        "created_at": at,
        "started_at": started,
        "finished_at": started + timedelta(seconds=seconds),
    }
    history.jobs.append(job)
    history.job_agents.extend(rows)
    return job


def _agent_row(
    history: History, job_id: str, environment: str, stable_key: str, at: datetime, error: str | None
) -> dict[str, Any]:
    """The agent's newest version that had reached the environment by then (held back in production)."""
    lag = timedelta(days=PACES[environment].lag_days)
    cap = HELD_BACK.get(stable_key) if environment == "production" else None
    versions = history.versions[stable_key]
    version = next(
        (v for v in reversed(versions) if v.created_at + lag <= at and (cap is None or v.number <= cap)),
        versions[0],
    )
    return {
        "job_id": job_id,
        "agent_id": history.agents[stable_key].id,
        "stable_key": stable_key,
        "version": version.number,
        "config": version.config,
        "config_hash": version.config_hash,
        "status": "error" if error else "complete",
        "error": error,
    }


def _message(rows: list[dict[str, Any]]) -> str:
    failed = [row for row in rows if row["error"]]
    if not failed:
        return f"Deployed {len(rows)} agent{'s' if len(rows) != 1 else ''}"
    return f"{len(failed)} of {len(rows)} agents failed; {failed[0]['stable_key']}: {failed[0]['error']}"


def _take_present_from(session: Session, jobs: list[dict[str, Any]]) -> None:
    """What runs of the pair is what its last successful job deployed; its state follows its last job."""
    deployed = session.get_one(
        DeploymentJobRow, next(j["id"] for j in reversed(jobs) if j["status"] == "complete")
    )
    (row,) = deployed.agent_rows
    session.add(
        AgentDeploymentRow(
            org_id=deployed.org_id,
            environment_id=deployed.environment_id,
            agent_id=row.agent_id,
            version=row.version,
            config=row.config,
            config_hash=row.config_hash,
            job_id=deployed.id,
            deployed_at=deployed.finished_at,
        )
    )
    session.flush()
    record_job_outcome(session, job=session.get_one(DeploymentJobRow, jobs[-1]["id"]))
