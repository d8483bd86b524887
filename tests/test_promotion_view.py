"""The promotion view: paths in order, what runs along them and since when, and what waits to be
promoted with what holds it back, in one read."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from api.errors import BadRequest
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployments import pinnable, versioned_agent, wait_for_end  # noqa: F401 (pinnable: a fixture)
from tests.test_promotion import backdate


def deployed(client, environment_id: str, stable_key: str, **options) -> None:
    job = client.deployments.deploy(environment_id, [stable_key], **options)
    assert wait_for_end(client, job.id).status == "complete"


def failed_in(db, environment_id: str, stable_key: str, *, minutes_ago: int) -> None:
    """A job in the environment that failed for the agent that long ago."""
    job_id = f"job_{uuid.uuid4().hex[:20]}"
    at = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    # A write transaction from its start (SQLite's BEGIN IMMEDIATE): one that read first could not
    # write after another writer committed in between.
    with db.session(write=True) as connection:
        org_id, agent_id = connection.execute(
            text(
                "SELECT e.org_id, a.id FROM environments e JOIN agents a ON a.org_id = e.org_id "
                "WHERE e.id = :e AND a.stable_key = :k"
            ),
            {"e": environment_id, "k": stable_key},
        ).one()
        connection.execute(
            text(
                "INSERT INTO deployment_jobs (id, org_id, environment_id, status, attempts, created_at, "
                "finished_at) VALUES (:j, :o, :e, 'error', 1, :at, :at)"
            ),
            {"j": job_id, "o": org_id, "e": environment_id, "at": at},
        )
        connection.execute(
            text(
                "INSERT INTO deployment_job_agents (job_id, agent_id, stable_key, version, config, "
                "config_hash, status, error) VALUES (:j, :a, :k, 2, '{}', 'x', 'error', 'boom')"
            ),
            {"j": job_id, "a": agent_id, "k": stable_key},
        )


def test_no_path_answers_no_environment_and_no_agent(client):
    alone = client.environments.create("alone").id
    versioned_agent(client, "triage")
    deployed(client, alone, "triage")
    view = client.deployments.promotions()
    assert (view.environments, view.items, view.total_agents) == ([], [], 0)


def test_environments_come_in_path_order_roots_first_then_what_promotes_from_them(client):
    made = {name: client.environments.create(name).id for name in ("prod", "dev", "eu", "staging", "lone")}
    other_root = client.environments.create("a-sandbox").id
    a_child = client.environments.create("a-review").id
    for child, parent in (("staging", "dev"), ("prod", "staging"), ("eu", "staging")):
        client.environments.update(made[child], promotes_from=made[parent])
    client.environments.update(a_child, promotes_from=other_root)
    view = client.deployments.promotions()
    assert [e.name for e in view.environments] == ["a-sandbox", "a-review", "dev", "staging", "eu", "prod"]
    assert [e.promotes_from for e in view.environments][:3] == [None, other_root, None]


def test_each_cell_runs_a_version_since_its_deployment_and_a_newer_one_waits(client, db, team):  # noqa: F811
    staging = client.environments.create("staging").id
    production = client.environments.create("production").id
    client.environments.update(production, promotes_from=staging, production=True)
    versioned_agent(client, "triage")
    versioned_agent(client, "kb")
    for key in ("triage", "kb"):
        deployed(client, staging, key)
    assert wait_for_end(client, client.deployments.promote(staging, production).id).status == "complete"
    client.environments.update(production, require_promotion=True, soak_minutes=60)
    client.agents.update("triage", name="Triage two")
    client.agents.snapshot("triage")
    deployed(client, staging, "triage")  # version 2 runs in staging, version 1 in production
    backdate(db, staging, 45)

    viewer = team.member("vera", "viewer")
    view = viewer.deployments.promotions()
    assert [e.name for e in view.environments] == ["staging", "production"]
    target = view.environments[1]
    assert (target.require_promotion, target.soak_minutes, target.production, target.protected) == (
        True,
        60,
        True,
        False,
    )
    rows = {row.stable_key: row for row in view.items}
    assert list(rows) == ["kb", "triage"] and view.total_agents == 2
    assert [(r.environment_id, r.version) for r in rows["triage"].running] == [(staging, 2), (production, 1)]
    assert rows["kb"].waiting == []  # the same version runs in both
    (waiting,) = rows["triage"].waiting
    assert (waiting.environment_id, waiting.from_environment_id, waiting.version) == (production, staging, 2)
    assert waiting.soak_minutes_left == 15 and waiting.failed_since is None
    assert waiting.blocks == ["triage version 2 must run in 'staging' for 60 min first (15 min left)"]

    backdate(db, staging, 61)
    failed_in(db, staging, "triage", minutes_ago=30)
    (failed,) = {row.stable_key: row for row in client.deployments.promotions().items}["triage"].waiting
    assert failed.soak_minutes_left is None and failed.failed_since is not None
    assert "failed in 'staging'" in failed.blocks[0]


def test_a_request_under_review_is_named_where_it_waits(client, team):  # noqa: F811
    staging = client.environments.create("staging").id
    production = client.environments.create("production").id
    client.environments.update(production, promotes_from=staging, protected=True)
    versioned_agent(client, "triage")
    deployed(client, staging, "triage")
    ana = team.member("ana", "operator")
    payload = {"environmentId": production, "agentStableKeys": ["triage"], "promotedFrom": staging}
    opened = ana.change_requests.open("deployment", payload, "Promote triage")
    view = client.deployments.promotions()
    assert view.environments[1].pending_change_request_ids == [opened.id]
    (waiting,) = view.items[0].waiting
    assert waiting.change_request_id == opened.id and waiting.blocks == []
    ana.change_requests.cancel(opened.id)
    after = client.deployments.promotions()
    assert after.environments[1].pending_change_request_ids == []
    assert after.items[0].waiting[0].change_request_id is None


def test_prompt_pins_show_and_agents_page(client, pinnable):  # noqa: F811
    staging = pinnable  # alpha's prompt `triage` can be pinned
    production = client.environments.create("production").id
    client.environments.update(production, promotes_from=staging)
    deployed(client, staging, "alpha", prompt_name="triage", version="1")
    versioned_agent(client, "zed")
    deployed(client, production, "zed")
    first = client.deployments.promotions(limit=1)
    assert [row.stable_key for row in first.items] == ["alpha"] and first.total_agents == 2
    assert first.items[0].running[0].prompt_pins == {"triage": "1"}
    second = client.deployments.promotions(limit=1, offset=1)
    assert [row.stable_key for row in second.items] == ["zed"] and second.items[0].waiting == []


def test_another_organization_sees_none_of_it_and_a_bad_limit_is_400(client, server, other_org, http, org):
    staging = client.environments.create("staging").id
    client.environments.update(client.environments.create("production").id, promotes_from=staging)
    answer = http.get(
        "agents/deployments/promotions", params={"orgSlug": other_org.slug}, headers=other_org.headers
    )
    assert answer.status_code == 200 and answer.json()["environments"] == []
    with pytest.raises(BadRequest) as bad:
        client.deployments.promotions(limit=0)
    assert bad.value.details[0].field == "limit"
