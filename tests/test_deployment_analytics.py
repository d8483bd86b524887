"""Deployment heatmaps and metrics against figures worked out by hand, rollups kept by the worker."""

from __future__ import annotations

import json
import random
import statistics
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from alembic import command
from sqlalchemy import MetaData, select

from api import OrgdeckClient
from api.deployments import MAX_ANALYTICS_DAYS, DeploymentJob, DeploymentRequest, Heatmap, MetricsFigures
from service.agents.models import AgentRow
from service.deployments import service as deployments
from service.deployments.analytics_cache import rollup_version
from service.deployments.histograms import BUCKET_RATIO
from service.deployments.models import (
    DeploymentAgentRollupRow,
    DeploymentHourlyRollupRow,
    DeploymentIncidentRow,
    DeploymentMetricRollupRow,
    DeploymentMonthRollupRow,
)
from service.deployments.models import DeploymentJobAgentRow as JobAgentRow
from service.deployments.models import DeploymentJobRow as JobRow
from service.deployments.rollups import rebuild_rollups
from service.deployments.runner import MAX_ATTEMPTS, run_deployment_jobs
from service.orgs.models import OrganizationRow
from service.storage.db import Database, utcnow
from service.storage.ids import new_id
from service.storage.migrate import alembic_config
from tests.conftest import Org, scratch_database
from tests.test_deployments import versioned_agent, wait_for_end

START, END = date(2025, 3, 3), date(2025, 3, 10)  # a Monday to the next Monday


def at(day: int, clock: str) -> datetime:
    hour, minute = map(int, clock.split(":"))
    return datetime(2025, 3, day, hour, minute, tzinfo=UTC)


# (environment, created, seconds from start to finish, job status, agent results); every job
# starts 10 s after it was created. Finishes: 1 at 3rd 09:16:20, 2 at 3rd 09:42:10, 3 at 4th
# 14:00:40, 4 at 9th 23:31:40, 5 at 10th 00:10:55, 6 at 5th 09:05:10, 7 at 5th 09:50:20.
JOBS: list[tuple[str, datetime, int, str, dict[str, str]]] = [
    ("a", at(3, "09:15"), 60, "complete", {"alpha": "complete", "beta": "complete"}),  # 1
    ("a", at(3, "09:40"), 120, "error", {"alpha": "error", "beta": "error"}),  # 2
    ("a", at(4, "14:00"), 30, "complete", {"alpha": "complete"}),  # 3 restores 2
    ("a", at(9, "23:30"), 90, "partial", {"alpha": "complete", "beta": "error"}),  # 4 (a Sunday)
    ("a", at(10, "00:10"), 45, "complete", {"beta": "complete"}),  # 5 restores 4
    ("b", at(5, "09:00"), 300, "complete", {"alpha": "complete"}),  # 6
    ("b", at(5, "09:50"), 10, "error", {"alpha": "error"}),  # 7
    ("b", at(11, "08:00"), 20, "complete", {"alpha": "complete"}),  # after the range; restores 7
    ("a", datetime(2025, 3, 2, 23, 59, 59, tzinfo=UTC), 60, "error", {"alpha": "error"}),  # before it
]
RESTORE_2 = 86400 + 4 * 3600 + 18 * 60 + 30  # 3rd 09:42:10 → 4th 14:00:40
RESTORE_4 = 39 * 60 + 15  # 9th 23:31:40 → 10th 00:10:55
RESTORE_7 = 5 * 86400 + 22 * 3600 + 10 * 60 + 10  # 5th 09:50:20 → 11th 08:00:30


class Fixture:
    """An org with environments `a` and `b` and agents `alpha` and `beta`, and JOBS written directly."""

    def __init__(self, db: Database, client: OrgdeckClient) -> None:
        self.db = db
        self.client = client
        self.env = {"a": client.environments.create("env-a").id, "b": client.environments.create("env-b").id}
        versioned_agent(client, "alpha")
        versioned_agent(client, "beta")
        with db.session() as session:
            self.org_id = org_id_of(session, client.org_slug)
            agents = session.execute(
                select(AgentRow.stable_key, AgentRow.id).where(AgentRow.org_id == self.org_id)
            )
            self.agent_ids = {key: id_ for key, id_ in agents}

    def add_jobs(self, jobs: list[tuple[str, datetime, int, str, dict[str, str]]]) -> None:
        with self.db.session(write=True) as session:
            for environment, created, seconds, status, results in jobs:
                session.add(self.job(self.env[environment], created, seconds, status, results))
            session.flush()
            rebuild_rollups(session, org_id=self.org_id)

    def job(
        self, environment_id: str, created: datetime, seconds: int, status: str, results: dict[str, str]
    ) -> JobRow:
        started = created + timedelta(seconds=10)
        running = status == "running"
        agents = [
            JobAgentRow(
                agent_id=self.agent_ids[key],
                stable_key=key,
                version=1,
                config={},
                config_hash="0" * 64,
                status=result,
                error="refused" if result == "error" else None,
            )
            for key, result in results.items()
        ]
        return JobRow(
            id=new_id("job", at=created),
            org_id=self.org_id,
            environment_id=environment_id,
            status=status,
            attempts=1,
            created_at=created,
            started_at=started,
            finished_at=None if running else started + timedelta(seconds=seconds),
            # A live lease: the service's worker leaves a running job alone.
            lease_token="lease_test" if running else None,
            lease_expires_at=utcnow() + timedelta(days=1) if running else None,
            agent_rows=agents,
        )


def org_id_of(session: Any, slug: str) -> str:
    return session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == slug))


@pytest.fixture
def fixture(db: Database, client: OrgdeckClient) -> Fixture:
    made = Fixture(db, client)
    # A job still running, on a day with ended ones: not counted until it ends.
    made.add_jobs([*JOBS, ("a", at(3, "09:20"), 0, "running", {"alpha": "pending"})])
    return made


def cells(heatmap: Heatmap) -> dict[tuple[str, str], tuple[int, int, float | None]]:
    """The grid's cells with jobs: (row id, column id) -> (count, failures, value)."""
    found = {}
    for i, row in enumerate(heatmap.rows):
        for j, column in enumerate(heatmap.columns):
            if heatmap.counts[i][j]:
                found[row.id, column.id] = (
                    heatmap.counts[i][j],
                    heatmap.failures[i][j],
                    heatmap.values[i][j],
                )
    return found


def total(heatmap: Heatmap) -> tuple[int, int]:
    return sum(map(sum, heatmap.counts)), sum(map(sum, heatmap.failures))


def figures(metrics: MetricsFigures) -> tuple[Any, ...]:
    """Counts as they are; medians as what they must be near: the exact median within one bucket."""
    return (
        metrics.deployments,
        metrics.successes,
        metrics.failures,
        metrics.deployments_per_day,
        metrics.change_failure_rate,
        Near(metrics.median_duration_seconds),
        Near(metrics.median_time_to_restore_seconds),
    )


class Near:
    """A median read from histograms, equal to an exact median it lies within one bucket of."""

    def __init__(self, value: float | None) -> None:
        self.value = value

    def __eq__(self, exact: object) -> bool:
        if isinstance(exact, Near):
            return self.value == exact.value
        if self.value is None or exact is None:
            return self.value is exact
        assert isinstance(exact, int | float)
        return abs(self.value - exact) <= exact * (BUCKET_RATIO - 1)

    def __repr__(self) -> str:
        return f"~{self.value}"


# -- heatmaps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "values"),
    [("count", (2, 1, 1, 1, 2)), ("failures", (1, 0, 1, 0, 1)), ("failure_rate", (0.5, 0.0, 1.0, 0.0, 0.5))],
)
def test_environment_by_day_counts_ended_jobs_on_the_day_they_were_created(fixture, metric, values):
    heatmap = fixture.client.deployments.heatmap(metric=metric, start=START, end=END)

    a, b = fixture.env["a"], fixture.env["b"]
    assert (heatmap.group_by, heatmap.bucket, heatmap.metric) == ("environment", "day", metric)
    assert (heatmap.start, heatmap.end) == (START, END)
    assert [(row.id, row.name) for row in heatmap.rows] == [(a, "env-a"), (b, "env-b")]
    assert [column.id for column in heatmap.columns] == [
        (START + timedelta(days=n)).isoformat() for n in range(8)
    ]
    counts = [(2, 1), (1, 0), (1, 1), (1, 0), (2, 1)]
    keys = [(a, "2025-03-03"), (a, "2025-03-04"), (a, "2025-03-09"), (a, "2025-03-10"), (b, "2025-03-05")]
    assert cells(heatmap) == {
        key: (count, failed, value) for key, (count, failed), value in zip(keys, counts, values, strict=True)
    }


def test_the_grids_travel_as_rows_of_numbers_and_a_range_may_cut_months(fixture, http, org):
    # From mid-February to the second day with jobs: the month rows are cut at both ends.
    query = {"orgSlug": org.slug, "metric": "failure_rate", "start": "2025-02-20", "end": "2025-03-04"}
    answer = http.get("agents/deployments/heatmap", params=query, headers=org.headers)
    assert answer.status_code == 200
    body = answer.json()
    assert [column["id"] for column in body["columns"]][10:] == ["2025-03-02", "2025-03-03", "2025-03-04"]
    # Environment a: the job just before the fixture's range, then the 3rd's two and the 4th's one.
    assert body["counts"] == [[0] * 10 + [1, 2, 1], [0] * 13]
    assert body["failures"] == [[0] * 10 + [1, 1, 0], [0] * 13]
    assert body["values"] == [[None] * 10 + [1.0, 0.5, 0.0], [None] * 13]
    assert Heatmap.model_validate(body).model_dump(mode="json", by_alias=True) == body


def test_environment_by_week_starts_weeks_on_monday(fixture):
    heatmap = fixture.client.deployments.heatmap(bucket="week", metric="failure_rate", start=START, end=END)

    a, b = fixture.env["a"], fixture.env["b"]
    assert [column.id for column in heatmap.columns] == ["2025-03-03", "2025-03-10"]
    assert cells(heatmap) == {
        (a, "2025-03-03"): (4, 2, 0.5),
        (a, "2025-03-10"): (1, 0, 0.0),
        (b, "2025-03-03"): (2, 1, 0.5),
    }
    # A range starting mid-week still shows the whole week's column, counting only days in range.
    midweek = fixture.client.deployments.heatmap(bucket="week", start=date(2025, 3, 5), end=END)
    assert [column.id for column in midweek.columns] == ["2025-03-03", "2025-03-10"]
    assert cells(midweek)[a, "2025-03-03"] == (1, 1, 1.0)
    # Weeks across a month's end sum days from both months.
    across = fixture.client.deployments.heatmap(bucket="week", start=date(2025, 2, 20), end=END)
    assert [column.id for column in across.columns] == [
        "2025-02-17",
        "2025-02-24",
        "2025-03-03",
        "2025-03-10",
    ]
    assert across.counts == [[0, 1, 4, 1], [0, 0, 2, 0]]
    assert across.failures == [[0, 1, 2, 0], [0, 0, 1, 0]]


def test_weekday_by_hour_in_utc(fixture):
    heatmap = fixture.client.deployments.heatmap(
        group_by="weekday_hour", metric="failures", start=START, end=END
    )

    assert [row.id for row in heatmap.rows] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert [column.id for column in heatmap.columns] == [f"{hour:02d}" for hour in range(24)]
    assert cells(heatmap) == {
        ("Mon", "09"): (2, 1, 1),
        ("Mon", "00"): (1, 0, 0),
        ("Tue", "14"): (1, 0, 0),
        ("Wed", "09"): (2, 1, 1),
        ("Sun", "23"): (1, 1, 1),
    }
    only_b = fixture.client.deployments.heatmap(
        group_by="weekday_hour", start=START, end=END, environment_id=fixture.env["b"]
    )
    assert cells(only_b) == {("Wed", "09"): (2, 1, 2)}


def test_agent_by_environment_counts_each_agent_result(fixture):
    heatmap = fixture.client.deployments.heatmap(
        group_by="agent", metric="failure_rate", start=START, end=END
    )

    a, b = fixture.env["a"], fixture.env["b"]
    assert [(row.id, row.name) for row in heatmap.rows] == [("alpha", "alpha"), ("beta", "beta")]
    assert [column.id for column in heatmap.columns] == [a, b]
    assert cells(heatmap) == {("alpha", a): (4, 1, 0.25), ("beta", a): (4, 2, 0.5), ("alpha", b): (2, 1, 0.5)}
    only_b = fixture.client.deployments.heatmap(group_by="agent", start=START, end=END, environment_id=b)
    assert [row.id for row in only_b.rows] == ["alpha"] and [column.id for column in only_b.columns] == [b]
    assert cells(only_b) == {("alpha", b): (2, 1, 2)}


def test_environment_filter_and_a_range_without_jobs(fixture):
    b = fixture.env["b"]
    only_b = fixture.client.deployments.heatmap(start=START, end=END, environment_id=b)
    assert [row.id for row in only_b.rows] == [b]
    assert cells(only_b) == {(b, "2025-03-05"): (2, 1, 2)}

    empty = fixture.client.deployments.heatmap(start=date(2024, 1, 1), end=date(2024, 1, 31))
    assert empty.counts == [[0] * 31] * 2 and len(empty.columns) == 31 and len(empty.rows) == 2


def test_the_default_range_is_the_last_90_days_and_731_days_is_the_most(client):
    today = utcnow().date()
    heatmap = client.deployments.heatmap()
    assert (heatmap.start, heatmap.end) == (today - timedelta(days=89), today)
    assert client.deployments.metrics(end=date(2025, 3, 10)).start == date(2024, 12, 11)
    widest = client.deployments.heatmap(bucket="week", start=date(2023, 1, 1), end=date(2024, 12, 31))
    assert (widest.end - widest.start).days + 1 == MAX_ANALYTICS_DAYS


# -- metrics ------------------------------------------------------------------------------


def test_metrics_by_week_over_the_range_per_period_and_per_environment(fixture):
    metrics = fixture.client.deployments.metrics(period="week", start=START, end=END)

    assert (metrics.period, metrics.start, metrics.end) == ("week", START, END)
    # Durations 10 30 45 60 90 120 300; incidents of jobs 2, 4 and 7 (7 restored after the range).
    # Frequency: 4 complete jobs over the 8 days.
    assert figures(metrics.totals) == (7, 4, 3, 0.5, 0.4286, 60.0, RESTORE_2)
    first, second = metrics.periods
    assert (first.period_start, second.period_start) == (START, END)
    assert figures(first) == (6, 3, 3, 0.4286, 0.5, 75.0, RESTORE_2)  # 7 days of the range
    assert figures(second) == (1, 1, 0, 1.0, 0.0, 45.0, None)  # 1 day of the range
    a, b = metrics.environments
    assert (a.environment_id, a.environment_name, b.environment_name) == (fixture.env["a"], "env-a", "env-b")
    assert figures(a) == (5, 3, 2, 0.375, 0.4, 60.0, (RESTORE_2 + RESTORE_4) / 2)
    assert [figures(point) for point in a.periods] == [
        (4, 2, 2, 0.2857, 0.5, 75.0, (RESTORE_2 + RESTORE_4) / 2),
        (1, 1, 0, 1.0, 0.0, 45.0, None),
    ]
    # env-b's first deployment was on the 5th: its frequency counts the 6 days from then.
    assert (metrics.counted_from, a.counted_from, b.counted_from) == (START, START, date(2025, 3, 5))
    assert figures(b) == (2, 1, 1, 0.1667, 0.5, 155.0, RESTORE_7)
    assert [figures(point) for point in b.periods] == [
        (2, 1, 1, 0.2, 0.5, 155.0, RESTORE_7),
        (0, 0, 0, 0.0, None, None, None),
    ]


def test_metrics_by_day_and_month_and_for_one_environment(fixture):
    by_day = fixture.client.deployments.metrics(period="day", start=START, end=END)
    assert [point.period_start for point in by_day.periods] == [START + timedelta(days=n) for n in range(8)]
    points = {point.period_start: figures(point) for point in by_day.periods}
    assert points[START] == (2, 1, 1, 1.0, 0.5, 90.0, RESTORE_2)
    assert points[date(2025, 3, 6)] == (0, 0, 0, 0.0, None, None, None)

    by_month = fixture.client.deployments.metrics(period="month", start=START, end=END)
    [month] = by_month.periods
    assert month.period_start == date(2025, 3, 1)
    assert figures(month) == figures(by_month.totals)

    only_b = fixture.client.deployments.metrics(start=START, end=END, environment_id=fixture.env["b"])
    assert [environment.environment_name for environment in only_b.environments] == ["env-b"]
    assert figures(only_b.totals) == (2, 1, 1, 0.1667, 0.5, 155.0, RESTORE_7)
    assert only_b.counted_from == date(2025, 3, 5)


def test_the_agent_heatmap_of_whole_months_matches_the_sum_of_its_days(fixture):
    whole = cells(
        fixture.client.deployments.heatmap(group_by="agent", start=date(2025, 2, 20), end=date(2025, 4, 2))
    )
    halves = [
        fixture.client.deployments.heatmap(group_by="agent", start=first, end=last)
        for first, last in [(date(2025, 2, 20), date(2025, 3, 9)), (date(2025, 3, 10), date(2025, 4, 2))]
    ]
    summed: dict[tuple[str, str], tuple[int, int]] = {}
    for half in halves:
        for key, (count, failures, _) in cells(half).items():
            before = summed.get(key, (0, 0))
            summed[key] = (before[0] + count, before[1] + failures)
    assert {key: value[:2] for key, value in whole.items()} == summed
    # Every agent result of JOBS: alpha 8 (3 failed), beta 4 (2 failed) across both environments.
    assert tuple(map(sum, zip(*summed.values(), strict=True))) == (12, 5)


def test_whole_months_read_from_month_rows_as_from_their_days(fixture):
    """A range of whole months reads each month's own row: the figures are the days' figures."""
    fixture.add_jobs(
        [
            ("b", datetime(2025, 4, day, 12, tzinfo=UTC), 40 + day, "complete", {"alpha": "complete"})
            for day in range(1, 31)
        ]
    )
    by_month = fixture.client.deployments.metrics(
        period="month", start=date(2025, 3, 1), end=date(2025, 4, 30)
    )
    by_day = fixture.client.deployments.metrics(period="day", start=date(2025, 3, 1), end=date(2025, 4, 30))
    march, april = by_month.periods
    assert figures(april) == (30, 30, 0, 1.0, 0.0, 45.5 + 10, None)
    assert march.deployments == sum(
        point.deployments for point in by_day.periods if point.period_start.month == 3
    )
    assert (by_month.totals.deployments, by_month.totals.successes) == (
        39,
        35,
    )  # March's 9 (one on the 11th, after the fixture's range)
    assert by_month.totals.median_duration_seconds == by_day.totals.median_duration_seconds


def test_frequencies_count_successes_per_elapsed_day_since_the_first_deployment(fixture):
    """A range reaching back before anything was deployed is not diluted by the empty days, nor one
    reaching into days still to come."""
    metrics = fixture.client.deployments.metrics(period="week", start=date(2025, 1, 6), end=END)
    # The first ended job of the org was made on Sunday the 2nd: 9 days to the 10th, 4 complete jobs.
    assert metrics.counted_from == date(2025, 3, 2)
    assert (metrics.totals.deployments, metrics.totals.successes) == (8, 4)
    assert metrics.totals.deployments_per_day == round(4 / 9, 4)
    weeks = {point.period_start: point.deployments_per_day for point in metrics.periods}
    assert weeks[date(2025, 1, 6)] is None and weeks[date(2025, 2, 17)] is None  # before any
    assert weeks[date(2025, 2, 24)] == 0.0  # the one day of that week since the first: a failure
    assert weeks[START] == round(3 / 7, 4)
    a, b = metrics.environments
    assert (a.counted_from, b.counted_from) == (date(2025, 3, 2), date(2025, 3, 5))
    assert a.deployments_per_day == round(3 / 9, 4) and b.deployments_per_day == round(1 / 6, 4)
    # A range wholly after the first deployment counts from its own start, as before.
    later = fixture.client.deployments.metrics(period="day", start=date(2025, 3, 6), end=END)
    assert later.counted_from == date(2025, 3, 6)
    assert later.totals.deployments_per_day == round(1 / 5, 4)  # job 5 in 5 days

    today = utcnow().date()
    fixture.add_jobs(
        [("a", datetime.combine(today, datetime.min.time(), UTC), 5, "complete", {"alpha": "complete"})]
    )
    week = fixture.client.deployments.metrics(period="week", start=today - timedelta(days=today.weekday()))
    [this_week] = [point for point in week.periods if point.period_start <= today]
    elapsed = today.weekday() + 1
    assert this_week.deployments_per_day == round(1 / elapsed, 4)  # not over the days to come
    assert week.totals.deployments_per_day == round(1 / elapsed, 4)


def test_time_to_restore_is_per_incident_and_looks_past_the_range(fixture):
    """Three failures in a row are one incident, from the first one's end to the next complete
    job's; the complete job may have been created before the range or the failure."""
    november = date(2025, 11, 1)
    midnight = datetime(2025, 11, 1, tzinfo=UTC)
    fixture.add_jobs(
        [
            # Created one microsecond before the range, it ends 22 s after the failure made in it.
            ("b", midnight - timedelta(microseconds=1), 25, "complete", {"alpha": "complete"}),
            ("b", midnight, 3, "error", {"alpha": "error"}),  # ends at 00:00:13
            ("b", midnight + timedelta(days=1), 60, "complete", {"alpha": "complete"}),
            # A run of three failures on the 3rd, restored 30 min after the first one ended.
            ("a", midnight + timedelta(days=2), 50, "error", {"alpha": "error"}),  # ends 00:01:00
            (
                "a",
                midnight + timedelta(days=2, minutes=5),
                50,
                "partial",
                {"alpha": "error", "beta": "complete"},
            ),
            ("a", midnight + timedelta(days=2, minutes=10), 50, "error", {"alpha": "error"}),
            ("a", midnight + timedelta(days=2, minutes=30), 50, "complete", {"alpha": "complete"}),
        ]
    )
    metrics = fixture.client.deployments.metrics(
        period="day", start=november, end=november + timedelta(days=2)
    )
    first, _, third = metrics.periods
    assert Near(first.median_time_to_restore_seconds) == 25 - 1e-6 - 3
    assert Near(third.median_time_to_restore_seconds) == 30 * 60
    assert [point.failures for point in metrics.periods] == [1, 0, 3]
    assert figures(metrics.totals)[-1] == (22 + 1800) / 2


def test_medians_lie_within_one_bucket_of_the_exact_ones_on_random_jobs(fixture):
    rng = random.Random(20)
    begin = datetime(2025, 6, 1, tzinfo=UTC)
    jobs = [
        (
            rng.choice("ab"),
            begin + timedelta(seconds=rng.uniform(0, 20 * 86400)),
            rng.lognormvariate(4, 1.5),
            rng.choices(["complete", "error", "partial"], [0.7, 0.2, 0.1])[0],
            {"alpha": "complete"},
        )
        for _ in range(400)
    ]
    fixture.add_jobs(jobs)
    metrics = fixture.client.deployments.metrics(period="week", start=date(2025, 6, 1), end=date(2025, 6, 20))
    durations = [seconds for *_, seconds, _, _ in jobs]
    assert Near(metrics.totals.median_duration_seconds) == statistics.median(durations)
    assert metrics.totals.deployments == 400
    restores = exact_restores(jobs)
    assert Near(metrics.totals.median_time_to_restore_seconds) == statistics.median(restores)


def exact_restores(jobs: list[tuple[str, datetime, float, str, dict[str, str]]]) -> list[float]:
    """Each incident's time to restore, from the jobs' own times (every job starts 10 s after its creation)."""
    ends = sorted(
        (created + timedelta(seconds=10 + seconds), environment, status)
        for environment, created, seconds, status, _ in jobs
    )
    opened: dict[str, datetime] = {}
    restores = []
    for ended, environment, status in ends:
        if status != "complete":
            opened.setdefault(environment, ended)
        elif environment in opened:
            restores.append((ended - opened.pop(environment)).total_seconds())
    return restores


# -- through the worker -------------------------------------------------------------------


def test_the_worker_counts_each_job_that_ends_as_a_rebuild_does(client, db, settings):
    environment = client.environments.create("live").id
    versioned_agent(client, "alpha")
    done = wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id)
    with db.session(write=True) as session:
        # A job whose worker kept dying: the worker gives up on it, and it ends as an error.
        request = DeploymentRequest(
            org_slug=client.org_slug, environment_id=environment, agent_stable_keys=["alpha"]
        )
        job = deployments.create_job(
            session, org_id=org_id_of(session, client.org_slug), request=request, actor="ops"
        )
        job.status, job.attempts, job.wave_attempts = "running", MAX_ATTEMPTS, MAX_ATTEMPTS
        job.started_at = utcnow()
        job.lease_token, job.lease_expires_at = "lease_dead", utcnow() - timedelta(seconds=1)
        given_up = job.id
    run_deployment_jobs(db, settings)  # the service's own worker may take it first; either is right
    failed = wait_for_end(client, given_up)
    assert (done.status, failed.status) == ("complete", "error")

    today = done.created_at.date()
    heatmap = client.deployments.heatmap(start=today, end=failed.created_at.date())
    assert total(heatmap) == (2, 1)
    weekday = client.deployments.heatmap(group_by="weekday_hour", start=today, end=failed.created_at.date())
    assert next(iter(cells(weekday))) == (
        ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[done.created_at.weekday()],
        f"{done.created_at.hour:02d}",
    )
    assert client.deployments.metrics(start=today).totals.deployments == 2

    counted = rollup_rows(db, org_id_of_slug(db, client.org_slug))
    with db.session(write=True) as session:
        rebuild_rollups(session, org_id=org_id_of(session, client.org_slug))
    assert rollup_rows(db, org_id_of_slug(db, client.org_slug)) == counted


def test_kept_answers_change_with_a_job_end_a_rebuild_and_the_names_they_show(client, db, fixture):
    """Analytics answers are kept between requests (service.deployments.analytics_cache); whatever they
    were made from moving shows in the next answer: a job ending, a rebuild, a renamed environment
    or agent."""

    def answers() -> tuple[Heatmap, Heatmap, Any]:
        return (
            client.deployments.heatmap(start=START, end=END),
            client.deployments.heatmap(group_by="agent", start=START, end=END),
            client.deployments.metrics(period="week", start=START, end=END),
        )

    def version() -> int:
        with db.session() as session:
            return rollup_version(session, fixture.org_id)

    by_day, by_agent, metrics = answers()
    assert answers() == (by_day, by_agent, metrics)  # kept: the same answer again
    before = version()

    fixture.add_jobs([("b", at(6, "12:00"), 30, "error", {"beta": "error"})])  # a rebuild
    assert version() == before + 1
    by_day, by_agent, metrics = answers()
    assert (total(by_day), metrics.totals.deployments, metrics.totals.failures) == ((8, 4), 8, 4)
    assert cells(by_agent)["beta", fixture.env["b"]] == (1, 1, 1)

    client.environments.update(fixture.env["b"], name="env-b-renamed")
    client.agents.update("beta", name="Beta, renamed")
    by_day, by_agent, metrics = answers()
    assert [row.name for row in by_day.rows] == ["env-a", "env-b-renamed"]
    assert [column.name for column in by_agent.columns] == ["env-a", "env-b-renamed"]
    assert [row.name for row in by_agent.rows] == ["alpha", "Beta, renamed"]
    assert [environment.environment_name for environment in metrics.environments] == [
        "env-a",
        "env-b-renamed",
    ]

    # A job the worker ends moves the version in its own transaction.
    versioned_agent(client, "gamma")
    ended = wait_for_end(client, client.deployments.deploy(fixture.env["a"], ["gamma"]).id)
    assert version() == before + 2
    today = ended.created_at.date()
    assert client.deployments.metrics(start=today, end=today).totals.deployments == 1
    assert cells(client.deployments.heatmap(group_by="agent", start=today, end=today)) == {
        ("gamma", fixture.env["a"]): (1, 0, 1)
    }


def org_id_of_slug(db: Database, slug: str) -> str:
    with db.session() as session:
        return org_id_of(session, slug)


ROLLUPS = (
    DeploymentHourlyRollupRow,
    DeploymentMonthRollupRow,
    DeploymentMetricRollupRow,
    DeploymentIncidentRow,
    DeploymentAgentRollupRow,
)


def rollup_rows(db: Database, org_id: str) -> dict[str, list[tuple[Any, ...]]]:
    """Each rollup's rows, with the month rows' arrays read as lists (the text may differ in spacing)."""
    with db.session() as session:
        return {
            model.__tablename__: sorted(
                tuple(
                    json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value
                    for value in row
                )
                for row in session.execute(select(*model.__table__.c).where(model.org_id == org_id))
            )
            for model in ROLLUPS
        }


def test_the_migration_counts_the_jobs_that_ended_before_it(tmp_path):
    with scratch_database(tmp_path) as url:
        database = Database(url)
        try:
            config = alembic_config(database)
            command.upgrade(config, "0008_deployments")
            with database.engine.begin() as connection:
                tables = MetaData()
                tables.reflect(connection, only=["organizations", "environments", "deployment_jobs"])
                when = at(3, "09:15")
                connection.execute(
                    tables.tables["organizations"].insert(),
                    {"id": "org_1", "slug": "old", "name": "Old", "created_at": when},
                )
                environment = {"org_id": "org_1", "description": "", "target": "builtin"}
                connection.execute(
                    tables.tables["environments"].insert(),
                    {"id": "env_1", "name": "old", "created_at": when, "updated_at": when, **environment},
                )
                jobs = [("complete", "09:15"), ("error", "09:40"), ("partial", "10:05"), ("pending", "10:10")]
                connection.execute(
                    tables.tables["deployment_jobs"].insert(),
                    [
                        {"id": f"job_{n}", "org_id": "org_1", "environment_id": "env_1", "status": status}
                        | {"attempts": 1, "created_at": at(5, clock)}  # a Wednesday
                        for n, (status, clock) in enumerate(jobs)
                    ],
                )
            command.upgrade(config, "heads")

            migrated = rollup_rows(database, "org_1")
            assert [row[2:] for row in migrated["deployment_hourly_rollups"]] == [
                (date(2025, 3, 5), 9, 2, 1),
                (date(2025, 3, 5), 10, 1, 1),
            ]
            march = [0] * 31
            assert [row[2:] for row in migrated["deployment_month_rollups"]] == [
                (date(2025, 3, 1), [*march[:4], 3, *march[5:]], [*march[:4], 2, *march[5:]])
            ]
            with database.session(write=True) as session:
                rebuild_rollups(session, org_id="org_1")
            assert rollup_rows(database, "org_1") == migrated
        finally:
            database.dispose()


# -- isolation and bad input ----------------------------------------------------------------


def test_another_orgs_jobs_never_show(fixture, server, other_org: Org, db, http, org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        stranger = Fixture(db, other)
        stranger.add_jobs(JOBS[:3])
        assert total(other.deployments.heatmap(start=START, end=END))[0] == 3
        assert other.deployments.metrics(start=START, end=END).totals.deployments == 3
    mine = fixture.client.deployments.heatmap(start=START, end=END)
    assert total(mine)[0] == 7
    assert {row.id for row in mine.rows} == set(fixture.env.values())
    assert fixture.client.deployments.metrics(start=START, end=END).totals.deployments == 7
    # Another org's environment is as unknown as a made-up one.
    for path in ("heatmap", "metrics"):
        query = {"orgSlug": org.slug, "environmentId": stranger.env["a"]}
        response = http.get(f"agents/deployments/{path}", params=query, headers=org.headers)
        assert response.status_code == 400 and response.json()["details"][0]["field"] == "environmentId"


BOTH = [
    ({"start": "2025-02-30"}, "start"),
    ({"end": "yesterday"}, "end"),
    ({"start": "2025-03-10", "end": "2025-03-09"}, "end"),
    ({"start": "2023-01-01", "end": "2025-01-01"}, "start"),  # 732 days
    ({"start": "2020-01-01"}, "start"),  # up to today
    ({"environmentId": "env_doesnotexist"}, "environmentId"),
    ({"environmentId": "e" * 41}, "environmentId"),
]
HEATMAP = [
    ({"groupBy": "team"}, "groupBy"),
    ({"bucket": "month"}, "bucket"),
    ({"metric": "median"}, "metric"),
]


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [("heatmap", *case) for case in BOTH + HEATMAP]
    + [("metrics", *case) for case in [*BOTH, ({"period": "year"}, "period")]],
)
def test_bad_input_is_400_naming_the_field(http, org, path, query, field):
    response = http.get(
        f"agents/deployments/{path}", params={"orgSlug": org.slug, **query}, headers=org.headers
    )
    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["field"] == field, response.json()


def test_the_jobs_list_is_exactly_what_the_models_render(fixture, http, org):
    """The database writes each job's JSON: the fields, values and order of DeploymentJob, timestamps
    cut to the millisecond, text of every kind escaped, agents by stable key, pages by cursor."""
    rng = random.Random(11)
    texts = ['say "hi"\n', "naïve — ünïcode ✓", "back\\slash\ttab", "", None]
    with fixture.db.session(write=True) as session:
        for _ in range(23):
            microseconds = rng.choice([0, 999, 999_999, rng.randint(0, 999_999)])
            created = datetime(2025, 6, 1, tzinfo=UTC) + timedelta(
                seconds=rng.randint(0, 10**6), microseconds=microseconds
            )
            keys = rng.sample(["beta", "alpha"], rng.randint(0, 2))
            results = {key: rng.choice(["complete", "error", "pending"]) for key in keys}
            # Ended jobs only: the service's worker would take a pending one over between the two
            # reads compared below (and a lease drawn from the past would let it take a running one).
            status = rng.choice(["complete", "error", "partial"])
            job = fixture.job(fixture.env["b"], created, rng.randint(1, 500), status, results)
            job.message = rng.choice(texts)
            job.attempts = rng.randint(0, 3)
            job.lease_expires_at = rng.choice([None, created + timedelta(microseconds=rng.randint(0, 10**7))])
            for agent in job.agent_rows:
                agent.error = rng.choice(texts)
            session.add(job)
    with fixture.db.session() as session:
        rows = session.scalars(
            select(JobRow).where(JobRow.environment_id == fixture.env["b"]).order_by(JobRow.id.desc())
        )
        expected = [
            DeploymentJob.model_validate(
                {
                    **{
                        name: getattr(row, name)
                        for name in DeploymentJob.model_fields
                        if name not in {"agents", "change_request"}
                    },
                    "agents": sorted(row.agent_rows, key=lambda agent: agent.stable_key),
                    # Deployed directly: no change request to name.
                    "change_request": None,
                }
            ).model_dump(mode="json")
            for row in rows
        ]
    listed, cursor = [], None
    while True:
        params = {"orgSlug": org.slug, "environmentId": fixture.env["b"], "limit": 7}
        response = http.get(
            "agents/deployment-jobs",
            params=params | ({"cursor": cursor} if cursor else {}),
            headers=org.headers,
        )
        assert response.status_code == 200, response.text
        page = response.json()
        assert list(page) == ["items", "limit", "offset", "total", "nextCursor"]
        listed += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(expected) == 23 + 3  # with the fixture's three in b
    assert listed == expected
    assert [list(job) for job in listed] == [list(job) for job in expected]
    assert [[list(agent) for agent in job["agents"]] for job in listed] == [
        [list(agent) for agent in job["agents"]] for job in expected
    ]
