"""Promotion paths: an environment promotes from another (no loops), gates deployments on what ran
there first and for how long, and promotes exactly what runs complete there."""

from __future__ import annotations

import json
import random
import statistics
from datetime import UTC, date, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import select, text

from api.errors import BadRequest, Forbidden
from service.agents.models import AgentRow, AgentVersionRow
from service.deployments.models import DeploymentArrivalRow as ArrivalRow
from service.deployments.models import DeploymentJobAgentRow as JobAgentRow
from service.deployments.models import DeploymentJobRow as JobRow
from service.deployments.rollups import rebuild_rollups, record_job_end
from service.environments.models import EnvironmentRow
from service.orgs.models import OrganizationRow
from service.storage.db import Database
from service.storage.ids import new_id
from service.storage.migrate import alembic_config
from tests.conftest import count_rows, scratch_database
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployment_analytics import org_id_of
from tests.test_deployments import pinnable, versioned_agent, wait_for_end  # noqa: F401 (pinnable: a fixture)


def audit_actions(client, target_id: str) -> list[str]:
    return [event.action for event in client.audit.list(target_id=target_id).items]


def test_path_fields_are_set_by_admins_shown_and_audited(client, http, org):
    staging = client.environments.create("staging")
    production = client.environments.create("production")
    updated = client.environments.update(
        production.id, promotes_from=staging.id, require_promotion=True, soak_minutes=30, production=True
    )
    assert (updated.promotes_from, updated.require_promotion, updated.soak_minutes, updated.production) == (
        staging.id,
        True,
        30,
        True,
    )
    shown = http.get(
        f"environments/{production.id}", params={"orgSlug": org.slug}, headers=org.headers
    ).json()
    assert (shown["promotesFrom"], shown["requirePromotion"], shown["soakMinutes"], shown["production"]) == (
        staging.id,
        True,
        30,
        True,
    )
    cleared = http.patch(
        f"environments/{production.id}",
        json={"orgSlug": org.slug, "promotesFrom": None},
        headers=org.headers,
    )
    assert cleared.status_code == 200 and cleared.json()["promotesFrom"] is None
    assert audit_actions(client, production.id).count("updateEnvironment") == 2


def test_an_operator_cannot_change_the_path_or_its_gates(client, team):  # noqa: F811
    staging = client.environments.create("staging")
    production = client.environments.create("production")
    ops = team.member("ops", "operator")
    for change in (
        {"promotes_from": staging.id},
        {"require_promotion": True},
        {"soak_minutes": 5},
        {"production": True},
    ):
        with pytest.raises(Forbidden) as refused:
            ops.environments.update(production.id, **change)
        assert refused.value.code == "insufficient_role"
    assert client.environments.get(production.id).model_dump() == production.model_dump()


def test_a_loop_is_400_naming_it_and_changes_nothing(client, db):
    dev = client.environments.create("dev")
    staging = client.environments.create("staging")
    production = client.environments.create("production")
    client.environments.update(staging.id, promotes_from=dev.id)
    client.environments.update(production.id, promotes_from=staging.id)
    with pytest.raises(BadRequest) as loop:
        client.environments.update(dev.id, promotes_from=production.id)
    assert loop.value.details[0].field == "promotesFrom"
    assert "dev promotes from production promotes from staging promotes from dev" in loop.value.message
    with pytest.raises(BadRequest) as itself:
        client.environments.update(dev.id, promotes_from=dev.id)
    assert itself.value.details[0].field == "promotesFrom"
    with pytest.raises(BadRequest) as unknown:
        client.environments.update(dev.id, promotes_from="env_nothing")
    assert unknown.value.details[0].field == "promotesFrom"
    assert client.environments.get(dev.id).promotes_from is None


def test_several_environments_may_promote_from_one_and_deleting_it_clears_the_path(client):
    staging = client.environments.create("staging")
    eu = client.environments.create("eu-production")
    us = client.environments.create("us-production")
    for environment in (eu, us):
        client.environments.update(environment.id, promotes_from=staging.id)
    client.environments.delete(staging.id)
    assert [client.environments.get(e.id).promotes_from for e in (eu, us)] == [None, None]


# -- promotion ------------------------------------------------------------------------------


def running(db, environment_id: str) -> dict[str, tuple[int, dict]]:
    """What runs in the environment: by agent id, version and config without target-made keys."""
    with db.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT agent_id, version, config FROM agent_deployments WHERE environment_id = :e"),
            {"e": environment_id},
        ).all()
    return {
        agent_id: (
            version,
            {k: v for k, v in _json(config).items() if k not in {"policies", "policyBundleHash"}},
        )
        for agent_id, version, config in rows
    }


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


@pytest.fixture
def path(client) -> tuple[str, str]:
    """`staging` and `production`, which promotes from it."""
    staging = client.environments.create("staging").id
    production = client.environments.create("production").id
    client.environments.update(production, promotes_from=staging)
    return staging, production


def test_promotion_deploys_exactly_the_versions_and_prompt_pins_running_in_from(client, db, pinnable):  # noqa: F811
    staging = pinnable  # alpha's prompt `triage` can be pinned
    production = client.environments.create("production").id
    client.environments.update(production, promotes_from=staging)
    versioned_agent(client, "triage")
    client.agents.update("triage", provider_config={"model": "gpt-4o", "temperature": 0.5})
    client.agents.snapshot("triage")  # version 2, left undeployed
    pinned = client.deployments.deploy(staging, ["alpha"], prompt_name="triage", version="1")
    assert wait_for_end(client, pinned.id).status == "complete"
    first = client.deployments.deploy(staging, ["triage"], agent_versions={"triage": 1}, model="gpt-4.1")
    assert wait_for_end(client, first.id).status == "complete"

    jobs = count_rows(db, "deployment_jobs")  # the database's, which other tests share
    preview = client.deployments.preview_promotion(staging, production)
    assert [(a.stable_key, a.status, a.target_version) for a in preview.agents] == [
        ("alpha", "added", 1),
        ("triage", "added", 1),
    ]
    assert count_rows(db, "deployment_jobs") == jobs  # a preview starts nothing
    job = wait_for_end(client, client.deployments.promote(staging, production).id)
    assert job.status == "complete"
    promoted = running(db, production)
    assert promoted == running(db, staging)
    configs = {config["name"]: config for _, config in promoted.values()}
    assert configs["alpha"]["promptPins"] == {"triage": "1"}
    assert configs["triage"]["model"] == "gpt-4.1"
    assert not client.deployments.preview_promotion(staging, production).has_changes


def test_promotion_refuses_what_does_not_run_in_from_naming_the_field(client, http, org, db, path):
    staging, production = path
    versioned_agent(client, "triage")
    before = count_rows(db, "deployment_jobs")
    cases = [
        ({"from": staging, "to": production}, "from"),  # nothing runs there
        ({"from": "env_nothing", "to": production}, "from"),
        ({"from": staging, "to": "env_nothing"}, "to"),
        ({"from": staging, "to": staging}, "to"),
        ({"from": staging, "to": production, "agentStableKeys": ["triage"]}, "agentStableKeys"),
    ]
    for route in ("agents/deployments/promote", "agents/deployments/promote/preview"):
        for case, field in cases:
            answer = http.post(route, json={"orgSlug": org.slug, **case}, headers=org.headers)
            assert answer.status_code == 400, (route, case, answer.text)
            assert answer.json()["details"][0]["field"] == field, (route, case)
    assert count_rows(db, "deployment_jobs") == before


def test_promotion_to_a_protected_environment_goes_through_review(client, team, path):  # noqa: F811
    staging, production = path
    client.environments.update(production, protected=True)
    versioned_agent(client, "triage")
    assert wait_for_end(client, client.deployments.deploy(staging, ["triage"]).id).status == "complete"
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    with pytest.raises(Forbidden) as direct:
        ana.deployments.promote(staging, production)
    assert direct.value.code == "approval_required"
    assert '"promotedFrom"' in direct.value.message
    payload = {"environmentId": production, "agentStableKeys": ["triage"], "promotedFrom": staging}
    opened = ana.change_requests.open("deployment", payload, "Promote triage")
    applied = bo.change_requests.approve(opened.id)
    assert applied.status == "applied"
    job = wait_for_end(client, applied.result["jobId"])
    assert job.status == "complete" and job.change_request.id == opened.id


# -- gates ----------------------------------------------------------------------------------


def gated(client, staging: str, production: str, soak_minutes: int = 0) -> None:
    client.environments.update(production, require_promotion=True, soak_minutes=soak_minutes)


def backdate(db, environment_id: str, minutes: int) -> None:
    """What runs in the environment began that long ago."""
    with db.engine.begin() as connection:
        connection.execute(
            text("UPDATE agent_deployments SET deployed_at = :at WHERE environment_id = :e"),
            {"at": datetime.now(UTC) - timedelta(minutes=minutes), "e": environment_id},
        )


def test_promotion_required_refuses_a_version_not_run_in_from_and_passes_once_it_has(client, db, path):
    staging, production = path
    gated(client, staging, production)
    versioned_agent(client, "triage")
    with pytest.raises(Forbidden) as refused:
        client.deployments.deploy(production, ["triage"])
    assert refused.value.code == "promotion_required"
    assert "triage version 1 must run complete in 'staging' first" in refused.value.message
    warnings = client.deployments.preview(production, ["triage"]).warnings
    assert [(w.code, w.message) for w in warnings] == [("promotion_required", refused.value.message)]

    client.environments.update(production, protected=True)
    opened = client.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "First"
    )
    assert opened.preview["promotionBlocks"] == [refused.value.message]
    client.change_requests.cancel(opened.id)
    client.environments.update(production, protected=False)

    assert wait_for_end(client, client.deployments.deploy(staging, ["triage"]).id).status == "complete"
    client.agents.update("triage", name="Triage two")
    client.agents.snapshot("triage")  # version 2 has not run in staging
    with pytest.raises(Forbidden) as newer:
        client.deployments.deploy(production, ["triage"])
    assert "triage version 2 must run complete in 'staging' first" in newer.value.message
    job = client.deployments.deploy(production, ["triage"], agent_versions={"triage": 1})
    assert wait_for_end(client, job.id).status == "complete"
    assert client.deployments.preview(production, ["triage"], agent_versions={"triage": 1}).warnings == []


def test_soak_time_holds_a_version_until_it_ran_long_enough_without_failing(client, db, path):
    staging, production = path
    gated(client, staging, production, soak_minutes=60)
    versioned_agent(client, "triage")
    assert wait_for_end(client, client.deployments.deploy(staging, ["triage"]).id).status == "complete"
    backdate(db, staging, 45)
    with pytest.raises(Forbidden) as soaking:
        client.deployments.promote(staging, production)
    assert soaking.value.code == "promotion_required"
    assert "must run in 'staging' for 60 min first (15 min left)" in soaking.value.message
    assert [w.code for w in client.deployments.preview_promotion(staging, production).warnings] == [
        "promotion_required"
    ]
    backdate(db, staging, 61)
    assert client.deployments.preview_promotion(staging, production).warnings == []
    fail_agent_in(db, staging, "triage", minutes_ago=50)
    with pytest.raises(Forbidden) as failed:
        client.deployments.promote(staging, production)
    assert "triage version 1 failed in 'staging'" in failed.value.message
    # A new deployment there that completes starts the soak again; once soaked, it passes.
    assert wait_for_end(client, client.deployments.deploy(staging, ["triage"]).id).status == "complete"
    client.environments.update(production, soak_minutes=30)
    backdate(db, staging, 40)  # after the failure, 50 minutes ago
    assert wait_for_end(client, client.deployments.promote(staging, production).id).status == "complete"


def fail_agent_in(db, environment_id: str, stable_key: str, *, minutes_ago: int) -> None:
    """A job in the environment that failed for the agent that long ago."""
    with db.engine.begin() as connection:
        agent_id = connection.execute(
            text("SELECT agent_id FROM agent_deployments WHERE environment_id = :e"), {"e": environment_id}
        ).scalar_one()
        org_id = connection.execute(
            text("SELECT org_id FROM environments WHERE id = :e"), {"e": environment_id}
        ).scalar_one()
        now = datetime.now(UTC) - timedelta(minutes=minutes_ago)
        connection.execute(
            text(
                "INSERT INTO deployment_jobs (id, org_id, environment_id, status, attempts, created_at, "
                "finished_at) VALUES ('job_failed', :o, :e, 'error', 1, :now, :now)"
            ),
            {"o": org_id, "e": environment_id, "now": now},
        )
        connection.execute(
            text(
                "INSERT INTO deployment_job_agents (job_id, agent_id, stable_key, version, config, "
                "config_hash, status, error) VALUES ('job_failed', :a, :k, 1, '{}', 'x', 'error', 'boom')"
            ),
            {"a": agent_id, "k": stable_key},
        )


# -- lead time for changes ------------------------------------------------------------------


def test_lead_time_matches_a_brute_force_computation_over_random_histories(client, db):
    """Random versions and jobs in `staging`, `prod` (marked production) and `eu` (last on the path
    from staging), counted one by one at their ends in random order as concurrent workers would:
    the metrics' lead times per week, per environment and over the range are the medians a direct
    reading of every job gives; the same after a recount from the jobs (what the migration does),
    and at once for `staging` when it is marked production."""
    generator = random.Random(34)
    staging, prod, eu = (client.environments.create(name).id for name in ("staging", "prod", "eu"))
    client.environments.update(prod, production=True)
    client.environments.update(eu, promotes_from=staging)
    for key in ("alpha", "beta", "gamma"):
        versioned_agent(client, key)
    start, end = date(2025, 3, 3), date(2025, 4, 27)
    origin = datetime(2025, 2, 20, tzinfo=UTC)
    with db.session(write=True) as session:
        org_id = org_id_of(session, client.org_slug)
        agents = list(session.scalars(select(AgentRow).where(AgentRow.org_id == org_id)))
        created: dict[tuple[str, int], datetime] = {}
        for agent in agents:
            first = session.scalar(select(AgentVersionRow).where(AgentVersionRow.agent_id == agent.id))
            created[(agent.id, 1)] = first.created_at  # now: its arrivals fall after the range
            for number in range(2, 7):
                moment = origin + timedelta(seconds=generator.randrange(60 * 86400))
                session.add(
                    AgentVersionRow(
                        id=new_id("agv"),
                        agent_id=agent.id,
                        number=number,
                        content_hash=f"{number:064d}",
                        snapshot=first.snapshot,
                        created_at=moment,
                    )
                )
                created[(agent.id, number)] = moment
        history, jobs = [], []
        for _ in range(300):
            agent = generator.choice(agents)
            number = generator.randrange(1, 7)
            environment = generator.choice((staging, prod, eu))
            finished = created[(agent.id, number)] + timedelta(seconds=generator.randrange(1, 40 * 86400))
            status = generator.choice(("complete", "complete", "error"))
            history.append((agent.id, number, environment, finished, status))
            jobs.append(
                JobRow(
                    id=new_id("job", at=finished),
                    org_id=org_id,
                    environment_id=environment,
                    status=status,
                    attempts=1,
                    created_at=finished - timedelta(seconds=30),
                    started_at=finished - timedelta(seconds=20),
                    finished_at=finished,
                    agent_rows=[
                        JobAgentRow(
                            agent_id=agent.id,
                            stable_key=agent.stable_key,
                            version=number,
                            config={},
                            config_hash="0" * 64,
                            status=status,
                        )
                    ],
                )
            )
        session.add_all(jobs)
        session.flush()
        for job in jobs:  # in random order of their ends: an earlier end counted later still wins
            record_job_end(session, job)

    def week(moment: datetime) -> date:
        return moment.date() - timedelta(days=moment.weekday())

    def expected(environments: tuple[str, ...]) -> dict[date | None, float]:
        """By week (None: the range), the median lead time of versions first complete in any of them."""
        firsts: dict[tuple[str, int], datetime] = {}
        for agent_id, number, environment, finished, status in history:
            if environment in environments and status == "complete":
                version = (agent_id, number)
                firsts[version] = min(finished, firsts.get(version, finished))
        leads: dict[date | None, list[float]] = {}
        for version, reached in firsts.items():
            if start <= reached.date() <= end:
                for cell in (week(reached), None):
                    leads.setdefault(cell, []).append((reached - created[version]).total_seconds())
        return {cell: statistics.median(values) for cell, values in leads.items()}

    def check(production: tuple[str, ...]) -> None:
        answer = client.deployments.metrics(period="week", start=start, end=end)
        everywhere = expected(production)
        assert len(everywhere) > 5  # several weeks with arrivals: the history exercises the medians
        assert answer.totals.lead_time == pytest.approx(everywhere[None])
        assert {
            p.period_start: p.lead_time for p in answer.periods if p.lead_time is not None
        } == pytest.approx({cell: value for cell, value in everywhere.items() if cell is not None})
        by_environment = {e.environment_id: e for e in answer.environments}
        for environment in (staging, prod, eu):
            if environment not in production:
                assert by_environment[environment].lead_time is None
                continue
            own = expected((environment,))
            assert by_environment[environment].lead_time == pytest.approx(own[None])
            assert {
                p.period_start: p.lead_time
                for p in by_environment[environment].periods
                if p.lead_time is not None
            } == pytest.approx({cell: value for cell, value in own.items() if cell is not None})
        one = client.deployments.metrics(period="week", start=start, end=end, environment_id=eu)
        assert one.totals.lead_time == pytest.approx(expected((eu,))[None])

    check((prod, eu))
    with db.session(write=True) as session:
        rebuild_rollups(session, org_id=org_id)
    check((prod, eu))
    client.environments.update(staging, production=True)
    check((staging, prod, eu))


def test_the_migration_keeps_the_arrivals_of_jobs_that_ended_before_it(tmp_path):
    """0036 on a database with jobs: each version's first complete end per environment, with its
    lead time, as the worker would have kept them (a failed result and a later end count nowhere)."""
    created = datetime(2025, 3, 3, 9, tzinfo=UTC)
    with scratch_database(tmp_path) as url:
        database = Database(url)
        try:
            config = alembic_config(database)
            command.upgrade(config, "heads")
            with database.session(write=True) as session:
                session.add(OrganizationRow(id="org_1", slug="old", name="Old"))
                session.flush()  # the rows below have no relationships to order their inserts by
                session.add_all(EnvironmentRow(id=f"env_{n}", org_id="org_1", name=f"e{n}") for n in (1, 2))
                session.add(
                    AgentRow(
                        id="agent_1",
                        org_id="org_1",
                        stable_key="alpha",
                        name="alpha",
                        provider="openai",
                        provider_config={},
                        prompt_references={},
                    )
                )
                session.flush()
                session.add(
                    AgentVersionRow(
                        agent_id="agent_1", number=1, content_hash="0" * 64, snapshot={}, created_at=created
                    )
                )
                ends = [("env_1", 90.5, "error"), ("env_1", 120.25, "complete"), ("env_1", 300, "complete")]
                ends.append(("env_2", 600, "complete"))
                for index, (environment, seconds, status) in enumerate(ends):
                    finished = created + timedelta(seconds=seconds)
                    session.add(
                        JobRow(
                            id=f"job_{index}",
                            org_id="org_1",
                            environment_id=environment,
                            status=status,
                            attempts=1,
                            created_at=created,
                            started_at=created,
                            finished_at=finished,
                            agent_rows=[
                                JobAgentRow(
                                    agent_id="agent_1",
                                    stable_key="alpha",
                                    version=1,
                                    config={},
                                    config_hash="0" * 64,
                                    status=status,
                                )
                            ],
                        )
                    )
            command.downgrade(config, "0034_promotion")
            command.upgrade(config, "heads")
            with database.session() as session:
                query = select(
                    ArrivalRow.environment_id, ArrivalRow.agent_id, ArrivalRow.version, ArrivalRow.reached_at
                ).add_columns(ArrivalRow.lead_seconds)
                kept = sorted(
                    tuple(row) for row in session.execute(query.where(ArrivalRow.org_id == "org_1"))
                )
            assert kept == [
                ("env_1", "agent_1", 1, created + timedelta(seconds=120.25), 120.25),
                ("env_2", "agent_1", 1, created + timedelta(seconds=600), 600.0),
            ]
        finally:
            database.dispose()
