"""Promotion paths: an environment promotes from another (no loops), gates deployments on what ran
there first and for how long, and promotes exactly what runs complete there."""

from __future__ import annotations

import pytest

from api.errors import BadRequest, Forbidden
from tests.test_changes import team  # noqa: F401 (a fixture)


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
