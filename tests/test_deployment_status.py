"""Deployment history, the status matrix (drift, staleness, errors), its events and the org's settings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from api import OrgdeckClient
from api.deployments import AgentStatus, StatusMatrix
from api.deployments import DeploymentJob as DeploymentJobRecord
from api.errors import BadRequest
from service.agents.models import AgentRow, AgentVersionRow
from service.deployments.matrix import MatrixPage, make_status_matrix, status_version
from service.deployments.models import AgentDeploymentRow, DeploymentJobRow, DeploymentStateRow
from service.deployments.states import check_due_states
from service.events.models import EventRow
from service.orgs.models import OrganizationRow
from service.registries.models import RegistryArtifactRow, RegistryArtifactVersionRow, RegistryRow
from service.runtime.server import ServerThread
from service.storage.db import Database
from tests.conftest import Org, new_org, wait_for
from tests.test_deployments import WebhookTarget, versioned_agent, wait_for_end, webhook_environment


@pytest.fixture
def target() -> Iterator[WebhookTarget]:
    receiver = WebhookTarget()
    yield receiver
    receiver.close()


def pair(client: OrgdeckClient, stable_key: str, environment_id: str) -> AgentStatus:
    matrix = client.deployments.status(agent=stable_key, environment_id=environment_id)
    (item,) = matrix.items
    return item


def events(db: Database, org_slug: str, kind: str) -> list[dict[str, Any]]:
    with db.session() as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org_slug))
        query = select(EventRow.payload).where(EventRow.org_id == org_id, EventRow.type == kind)
        return list(session.scalars(query.order_by(EventRow.occurred_at, EventRow.id)))


def agent_id(session: Any, org_slug: str, stable_key: str) -> str:
    query = (
        select(AgentRow.id)
        .join(OrganizationRow, OrganizationRow.id == AgentRow.org_id)
        .where(OrganizationRow.slug == org_slug, AgentRow.stable_key == stable_key)
    )
    return session.scalar(query)


def let_time_pass(db: Database, org_slug: str, stable_key: str, environment_id: str, days: float) -> None:
    """Move the pair's deployment, the agent's versions and the pair's next check `days` back."""
    earlier = timedelta(days=days)
    with db.session(write=True) as session:
        agent = agent_id(session, org_slug, stable_key)
        for version in session.scalars(select(AgentVersionRow).where(AgentVersionRow.agent_id == agent)):
            version.created_at -= earlier
        deployed = session.scalar(
            select(AgentDeploymentRow).where(
                AgentDeploymentRow.agent_id == agent, AgentDeploymentRow.environment_id == environment_id
            )
        )
        deployed.deployed_at -= earlier
        state = session.get(DeploymentStateRow, (agent, environment_id))
        if state.check_at is not None:
            state.check_at -= earlier


def drift_of(item: AgentStatus) -> set[tuple[str, str, Any, Any]]:
    return {(c.field, c.kind, c.before, c.after) for c in item.drift}


# -- history ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    org: Org
    client: OrgdeckClient
    environments: dict[str, str]
    jobs: dict[str, DeploymentJobRecord]


@pytest.fixture(scope="module")
def history(server: ServerThread, db: Database) -> Iterator[History]:
    """One org for every history test, with three jobs: `first` in staging for alpha and beta
    (2025-03-01), `second` in a webhook environment for both, beta failing (2025-03-02, late),
    `third` in staging for alpha (now)."""
    org = new_org(db)
    receiver = WebhookTarget()
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        staging = client.environments.create("staging").id
        hook = webhook_environment(client, receiver)
        receiver.failing = {"beta"}
        versioned_agent(client, "alpha")
        versioned_agent(client, "beta")
        jobs = {
            "first": wait_for_end(client, client.deployments.deploy(staging, ["alpha", "beta"]).id),
            "second": wait_for_end(client, client.deployments.deploy(hook, ["alpha", "beta"]).id),
            "third": wait_for_end(client, client.deployments.deploy(staging, ["alpha"], model="gpt-4.1").id),
        }
        with db.session(write=True) as session:
            session.get(DeploymentJobRow, jobs["first"].id).created_at = datetime(2025, 3, 1, tzinfo=UTC)
            late = datetime(2025, 3, 2, 23, 59, 59, 999000, tzinfo=UTC)
            session.get(DeploymentJobRow, jobs["second"].id).created_at = late
        yield History(org, client, {"staging": staging, "hook": hook}, jobs)
    receiver.close()


def test_history_is_each_agents_result_newest_first(history):
    first, second, third = (history.jobs[name] for name in ("first", "second", "third"))

    page = history.client.deployments.history()

    assert (page.total, page.limit, page.offset) == (5, 50, 0)
    assert [(e.job_id, e.stable_key, e.status) for e in page.items] == [
        (third.id, "alpha", "complete"),
        (second.id, "alpha", "complete"),
        (second.id, "beta", "error"),
        (first.id, "alpha", "complete"),
        (first.id, "beta", "complete"),
    ]
    failed = page.items[2]
    assert (failed.job_status, failed.version) == ("partial", 1)
    assert failed.environment_id == history.environments["hook"]
    assert failed.error == "refused by the target"
    assert failed.environment_name.startswith("hook-")
    newest = page.items[0]
    assert (newest.environment_name, newest.created_at, newest.finished_at) == (
        "staging",
        third.created_at,
        third.finished_at,
    )


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"agent": "beta"}, [("second", "beta"), ("first", "beta")]),
        ({"agent": "nobody"}, []),
        ({"environment": "hook"}, [("second", "alpha"), ("second", "beta")]),
        ({"status": ["error"]}, [("second", "beta")]),
        ({"status": ["error", "pending"]}, [("second", "beta")]),
        ({"agent": "alpha", "environment": "staging"}, [("third", "alpha"), ("first", "alpha")]),
        ({"start": date(2025, 3, 2), "end": date(2025, 3, 2)}, [("second", "alpha"), ("second", "beta")]),
        ({"start": date(2025, 3, 1), "end": date(2025, 3, 1)}, [("first", "alpha"), ("first", "beta")]),
        (
            {"end": date(2025, 3, 2)},
            [("second", "alpha"), ("second", "beta"), ("first", "alpha"), ("first", "beta")],
        ),
        ({"start": date(2025, 3, 3)}, [("third", "alpha")]),
    ],
)
def test_history_filters(history, filters, expected):
    environment = history.environments.get(filters.pop("environment", ""))
    page = history.client.deployments.history(environment_id=environment, **filters)
    names = {job.id: name for name, job in history.jobs.items()}
    assert [(names[e.job_id], e.stable_key) for e in page.items] == expected
    assert page.total == len(expected)
    counted = history.client.deployments.history(environment_id=environment, limit=1, **filters)
    assert (counted.total, counted.items) == (len(expected), page.items[:1])


def test_history_pages_with_a_total(history, http):
    second = history.jobs["second"]
    page = history.client.deployments.history(limit=2, offset=1)
    assert [(e.job_id, e.stable_key) for e in page.items] == [(second.id, "alpha"), (second.id, "beta")]
    assert (page.total, page.limit, page.offset) == (5, 2, 1)
    assert history.client.deployments.history(offset=5).items == []
    repeated = http.get(
        "agents/deployments/history",
        params=[("orgSlug", history.org.slug), ("status", "error"), ("status", "complete")],
        headers=history.org.headers,
    )
    assert repeated.status_code == 200 and repeated.json()["total"] == 5


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "complete,bogus"}, "status"),
        ({"status": "running"}, "status"),  # a job status, not an agent result
        ({"start": "2025-13-01"}, "start"),
        ({"end": "yesterday"}, "end"),
        ({"start": "2025-03-02", "end": "2025-03-01"}, "end"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"offset": "-1"}, "offset"),
    ],
)
def test_history_bad_input_is_400_naming_the_field(http, org, params, field):
    response = http.get(
        "agents/deployments/history", params={"orgSlug": org.slug, **params}, headers=org.headers
    )
    assert response.status_code == 400, response.text
    assert field in {detail["field"] for detail in response.json()["details"]}


# -- status ----------------------------------------------------------------------------------


def test_deploying_is_in_sync_and_undeployed_pairs_are_not_deployed(client):
    staging = client.environments.create("staging").id
    client.environments.create("production")
    versioned_agent(client, "alpha")
    client.agents.create("drafty", "openai")
    job = wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)

    matrix = client.deployments.status()

    assert [e.name for e in matrix.environments] == ["production", "staging"]
    assert matrix.stale_after_days == 7
    assert (matrix.total_agents, matrix.limit, matrix.offset) == (2, 50, 0)
    states = {(i.stable_key, i.environment_id): i for i in matrix.items}
    assert len(states) == 4
    alpha = states["alpha", staging]
    assert (alpha.state, alpha.deployed_version, alpha.latest_version) == ("in_sync", 1, 1)
    assert (alpha.last_job_id, alpha.deployed_at is not None, alpha.drift, alpha.error) == (
        job.id,
        True,
        [],
        None,
    )
    assert alpha.since is not None and alpha.since >= job.created_at
    assert {i.state for key, i in states.items() if key != ("alpha", staging)} == {"not_deployed"}
    assert states["drafty", staging].latest_version is None
    assert matrix.counts == {"in_sync": 1, "drifted": 0, "stale": 0, "error": 0, "not_deployed": 3}


def test_editing_the_draft_drifts_once_with_the_diff_and_redeploying_syncs(client, db):
    staging = client.environments.create("staging").id
    versioned_agent(client, "alpha", apiKey="${secret:OPENAI_KEY}")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)

    client.agents.update(
        "alpha", provider_config={"model": "gpt-4o-mini", "temperature": 0.7, "apiKey": "sk-x"}
    )

    drifted = pair(client, "alpha", staging)
    assert drifted.state == "drifted"
    assert drift_of(drifted) == {
        ("draft.providerConfig.temperature", "changed", 0.2, 0.7),
        ("draft.providerConfig.apiKey", "changed", "[redacted]", "[redacted]"),
    }
    (event,) = events(db, client.org_slug, "agent.drifted")
    assert event["stableKey"] == "alpha" and event["environmentId"] == staging
    assert (event["environmentName"], event["deployedVersion"], event["latestVersion"]) == ("staging", 1, 1)
    assert {change["field"] for change in event["drift"]} == {f for f, *_ in drift_of(drifted)}
    assert "sk-x" not in str(event)

    client.agents.update("alpha", name="Alpha agent")

    again = pair(client, "alpha", staging)
    assert (again.state, again.since) == ("drifted", drifted.since)
    assert ("draft.name", "changed", "alpha", "Alpha agent") in drift_of(again)
    assert len(events(db, client.org_slug, "agent.drifted")) == 1

    client.agents.snapshot("alpha")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)

    synced = pair(client, "alpha", staging)
    assert (synced.state, synced.deployed_version, synced.drift) == ("in_sync", 2, [])
    client.agents.update("alpha", name="Alpha, again")
    assert pair(client, "alpha", staging).state == "drifted"
    assert len(events(db, client.org_slug, "agent.drifted")) == 2


def test_a_version_made_from_the_draft_is_not_drift_and_reverting_the_draft_ends_drift(client):
    staging = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)
    client.agents.update("alpha", provider_config={"model": "gpt-4o"})
    assert pair(client, "alpha", staging).state == "drifted"

    client.agents.snapshot("alpha")

    waiting = pair(client, "alpha", staging)
    assert (waiting.state, waiting.deployed_version, waiting.latest_version) == ("in_sync", 1, 2)
    assert [(c.field, c.before, c.after) for c in waiting.newer] == [("version", 1, 2)]
    client.agents.update("alpha", provider_config={"model": "gpt-4o", "temperature": 1})
    assert pair(client, "alpha", staging).state == "drifted"
    client.agents.update("alpha", provider_config={"model": "gpt-4o"})
    assert pair(client, "alpha", staging).state == "in_sync"


def test_a_referenced_tools_new_hash_is_drift(client, db):
    staging = client.environments.create("staging").id
    client.tools.create("Search", "search")
    record = {"tool_name": "Search", "environment": "staging", "provider": "mcp", "tool_id": "s-1"}
    client.tool_deployments.record(tool_key="search", version="1.0", hash="sha256:aaa", **record)
    versioned_agent(client, "alpha")
    versioned_agent(client, "beta")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"], tool_refs=["search"]).id)
    wait_for_end(client, client.deployments.deploy(staging, ["beta"]).id)
    client.tool_deployments.record(tool_key="search", version="1.0", hash="sha256:aaa", **record)
    assert pair(client, "alpha", staging).state == "in_sync"

    client.tool_deployments.record(tool_key="search", version="1.1", hash="sha256:bbb", **record)

    alpha = pair(client, "alpha", staging)
    assert (alpha.state, drift_of(alpha)) == (
        "drifted",
        {("tools.search", "changed", "sha256:aaa", "sha256:bbb")},
    )
    assert pair(client, "beta", staging).state == "in_sync"  # does not reference it
    (event,) = events(db, client.org_slug, "agent.drifted")
    assert event["drift"] == [
        {"field": "tools.search", "kind": "changed", "before": "sha256:aaa", "after": "sha256:bbb"}
    ]
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"], tool_refs=["search"]).id)
    assert pair(client, "alpha", staging).state == "in_sync"


def test_a_failed_deployment_is_error_until_one_succeeds(client, db, target):
    hook = webhook_environment(client, target)
    versioned_agent(client, "alpha")
    target.failing = {"alpha"}
    failed = wait_for_end(client, client.deployments.deploy(hook, ["alpha"]).id)

    item = pair(client, "alpha", hook)
    assert (item.state, item.deployed_version, item.last_job_id) == ("error", None, failed.id)
    assert item.error == "refused by the target"
    client.agents.update("alpha", name="Renamed")  # drift while in error: error still wins
    assert pair(client, "alpha", hook).state == "error"
    assert events(db, client.org_slug, "agent.drifted") == []

    target.failing = set()
    client.agents.snapshot("alpha")
    wait_for_end(client, client.deployments.deploy(hook, ["alpha"]).id)
    assert (pair(client, "alpha", hook).state, pair(client, "alpha", hook).error) == ("in_sync", None)
    target.failing = {"alpha"}
    wait_for_end(client, client.deployments.deploy(hook, ["alpha"]).id)
    after = pair(client, "alpha", hook)
    assert (after.state, after.deployed_version) == ("error", 2)  # the last success still runs


def test_a_newer_version_past_the_threshold_is_stale_through_the_settings(client, db):
    staging = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)
    client.agents.update("alpha", provider_config={"model": "gpt-4o"})
    client.agents.snapshot("alpha")
    let_time_pass(db, client.org_slug, "alpha", staging, days=3)
    assert pair(client, "alpha", staging).state == "in_sync"  # 3 days of 7

    assert client.deployments.update_settings(stale_after_days=2).stale_after_days == 2

    stale = pair(client, "alpha", staging)
    assert (stale.state, stale.deployed_version, stale.latest_version) == ("stale", 1, 2)
    (event,) = events(db, client.org_slug, "agent.stale")
    assert (event["stableKey"], event["deployedVersion"], event["latestVersion"]) == ("alpha", 1, 2)
    assert event["newer"] == [{"field": "version", "kind": "changed", "before": 1, "after": 2}]
    assert event["staleAfterDays"] == 2
    assert client.deployments.status().counts["stale"] == 1
    client.deployments.update_settings(stale_after_days=2)
    assert len(events(db, client.org_slug, "agent.stale")) == 1

    client.deployments.update_settings(stale_after_days=30)
    assert pair(client, "alpha", staging).state == "in_sync"
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)
    assert pair(client, "alpha", staging).newer == []


def test_the_worker_makes_a_pair_stale_when_its_deadline_passes(client, db):
    staging = client.environments.create("staging").id
    client.deployments.update_settings(stale_after_days=1)
    versioned_agent(client, "alpha")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id)
    client.agents.update("alpha", name="Alpha 2")
    client.agents.snapshot("alpha")
    assert pair(client, "alpha", staging).state == "in_sync"

    let_time_pass(db, client.org_slug, "alpha", staging, days=1.5)

    wait_for(lambda: pair(client, "alpha", staging).state == "stale", what="the periodic check")
    assert len(events(db, client.org_slug, "agent.stale")) == 1
    with db.session() as session:
        state = session.get(DeploymentStateRow, (agent_id(session, client.org_slug, "alpha"), staging))
        assert state.check_at is None  # nothing left to wait for


def test_a_newer_version_of_a_pinned_prompt_makes_the_pair_stale(client, db, settings):
    staging = client.environments.create("staging").id
    registry = client.registries.create("prompts").registry_ref
    client.registries.publish(registry, "triage", "Sort tickets.")
    client.agents.create("alpha", "openai", prompt_references={"triage": f"{registry}/triage@production"})
    client.agents.snapshot("alpha")
    wait_for_end(client, client.deployments.deploy(staging, ["alpha"], prompt_name="triage", version="1").id)
    client.registries.publish(registry, "triage", "Sort tickets by urgency.")

    with db.session(write=True) as session:
        newest = session.scalar(
            select(RegistryArtifactVersionRow)
            .join(RegistryArtifactRow, RegistryArtifactRow.id == RegistryArtifactVersionRow.artifact_id)
            .join(RegistryRow, RegistryRow.id == RegistryArtifactRow.registry_id)
            .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
            .where(OrganizationRow.slug == client.org_slug, RegistryArtifactVersionRow.version == "2")
        )
        newest.created_at -= timedelta(days=8)
    # Last, since it makes the pair due: the worker may evaluate it from then on.
    let_time_pass(db, client.org_slug, "alpha", staging, days=8)
    check_due_states(db, settings)  # the worker's task, run here at once (if the worker has not yet)

    stale = pair(client, "alpha", staging)
    assert stale.state == "stale"
    assert [(c.field, c.before, c.after) for c in stale.newer] == [("promptPins.triage", "1", "2")]
    (event,) = events(db, client.org_slug, "agent.stale")
    assert event["newer"][0]["field"] == "promptPins.triage"


def test_filters_paging_and_counts(client):
    staging = client.environments.create("staging").id
    production = client.environments.create("production").id
    for key in ("alpha", "beta", "gamma"):
        versioned_agent(client, key)
    wait_for_end(client, client.deployments.deploy(staging, ["alpha", "beta"]).id)
    wait_for_end(client, client.deployments.deploy(production, ["alpha"]).id)
    client.agents.update("beta", name="Beta edited")
    client.agents.archive("alpha")

    matrix = client.deployments.status()
    assert [(i.stable_key, i.environment_id, i.state) for i in matrix.items] == [
        ("beta", production, "not_deployed"),
        ("beta", staging, "drifted"),
        ("gamma", production, "not_deployed"),
        ("gamma", staging, "not_deployed"),
    ]
    assert matrix.counts == {"in_sync": 0, "drifted": 1, "stale": 0, "error": 0, "not_deployed": 3}

    drifted = client.deployments.status(state=["drifted"])
    assert [(i.stable_key, i.state) for i in drifted.items] == [("beta", "drifted")]
    assert drifted.total_agents == 1 and drifted.counts == matrix.counts
    undeployed = client.deployments.status(state=["not_deployed"], environment_id=staging)
    assert [(i.stable_key, i.environment_id) for i in undeployed.items] == [("gamma", staging)]
    assert [e.id for e in undeployed.environments] == [staging]
    second_page = client.deployments.status(limit=1, offset=1)
    assert {i.stable_key for i in second_page.items} == {"gamma"}
    assert (second_page.total_agents, second_page.limit, second_page.offset) == (2, 1, 1)
    assert client.deployments.status(agent="nobody").items == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "in_sync,sideways"}, "state"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"offset": "-1"}, "offset"),
    ],
)
def test_status_bad_input_is_400_naming_the_field(http, org, params, field):
    response = http.get(
        "agents/deployments/status", params={"orgSlug": org.slug, **params}, headers=org.headers
    )
    assert response.status_code == 400, response.text
    assert field in {detail["field"] for detail in response.json()["details"]}


# -- settings ---------------------------------------------------------------------------------


def test_settings_default_and_bounds(client, http, org):
    assert client.deployments.settings().stale_after_days == 7
    assert client.deployments.update_settings(stale_after_days=365).stale_after_days == 365
    assert client.deployments.update_settings(stale_after_days=1).stale_after_days == 1
    for bad in (0, 366, -3, "soon", None):
        body = {"orgSlug": org.slug, "staleAfterDays": bad}
        response = http.put("agents/deployments/settings", json=body, headers=org.headers)
        assert response.status_code == 400, (bad, response.text)
        assert response.json()["details"][0]["field"] == "staleAfterDays"
    unknown = http.put(
        "agents/deployments/settings",
        json={"orgSlug": org.slug, "staleAfterDays": 3, "x": 1},
        headers=org.headers,
    )
    assert unknown.status_code == 400
    with pytest.raises(BadRequest):
        client.deployments.update_settings(stale_after_days=400)
    assert client.deployments.settings().stale_after_days == 1


def test_settings_are_per_org(client, server, other_org):
    client.deployments.update_settings(stale_after_days=3)
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.deployments.settings().stale_after_days == 7
        assert other.deployments.status().stale_after_days == 7
    assert client.deployments.status().stale_after_days == 3


def test_a_kept_matrix_is_made_again_after_every_change_it_shows(client, db, org, server, other_org):
    """Every change the matrix shows, through the API or written straight to the database, moves the
    org's status version as it commits; the page served is then the one made afresh. Another org's
    changes leave it alone."""
    staging = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    page = MatrixPage(environment_id=None, stable_key=None, states=(), limit=50, offset=0)

    def served_is_made_afresh() -> int:
        served = client.deployments.status()
        with db.session() as session:
            org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
            made = StatusMatrix.model_validate_json(make_status_matrix(session, org_id, page))
            version = status_version(session, org_id)
        assert served == made
        return version

    def write_cell_directly() -> None:
        with db.session(write=True) as session:
            state = session.get(DeploymentStateRow, (agent_id(session, org.slug, "alpha"), staging))
            state.cell = state.cell.replace('"state":"in_sync"', '"state":"error"')
            state.state = "error"

    changes = {
        "a job ended": lambda: wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id),
        "an agent made": lambda: client.agents.create("beta", "openai"),
        "an agent renamed": lambda: client.agents.update("beta", name="Beta"),
        "a version made": lambda: client.agents.snapshot("beta"),
        "an environment made": lambda: client.environments.create("production"),
        "an environment renamed": lambda: client.environments.update(staging, name="stage"),
        "the threshold set": lambda: client.deployments.update_settings(stale_after_days=3),
        "a cell written in SQL": write_cell_directly,
        "an agent archived": lambda: client.agents.archive("alpha"),
        "an environment deleted": lambda: client.environments.delete(staging),
    }
    version = served_is_made_afresh()
    for change, make in changes.items():
        make()
        moved = served_is_made_afresh()
        assert moved > version, change
        version = moved

    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        other.environments.create("elsewhere")
        versioned_agent(other, "gamma")
    assert served_is_made_afresh() == version
