"""Who may do what: every route's least role, members, keys that carry a role and an owner.

The matrix reads each operation's declared least role from the live OpenAPI document, so a new
route without a declaration fails here, and the reference's table of roles (docs/reference.md) must say the same.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from api import OrgdeckClient
from api.errors import BadRequest, Forbidden, Unauthorized
from api.members import ROLES, role_at_least
from tests.conftest import Org
from tests.processes import ROOT

OPEN = {("get", "/api/health"), ("get", "/api/health/live"), ("get", "/api/health/ready")}
PUBLIC_READS = {
    ("get", "/api/registries/artifacts"),
    ("get", "/api/registries/artifacts/versions"),
    ("get", "/api/registries/artifacts/retrieve"),
}


@pytest.fixture(scope="module")
def document(server) -> dict[str, Any]:
    # The first document is built on demand: on a busy machine that takes longer than the default 5 s.
    return httpx.get(f"{server.url}/openapi.json", timeout=60).json()


def declared_roles(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    roles = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if (method, path) in OPEN | PUBLIC_READS:
                continue
            assert "x-least-role" in operation, f"{method.upper()} {path} declares no least role"
            roles[(method, path)] = operation["x-least-role"]
    return roles


@pytest.fixture
def people(client: OrgdeckClient, org: Org) -> dict[str, str]:
    """A member of each role, each with a personal key of that role: role -> key value."""
    keys = {}
    for role in ROLES:
        member = client.members.create(f"{role}@example.com", f"The {role}", role)
        keys[role] = client.api_keys.create(f"{role}-laptop", member_id=member.id).key
    return keys


def call(http: httpx.Client, method: str, path: str, slug: str, key: str) -> httpx.Response:
    filled = re.sub(r"\{[^}]+\}", "x", path.removeprefix("/api/"))
    headers = {"X-API-Key": key}
    if method in {"get", "delete"}:
        return http.request(method.upper(), filled, params={"orgSlug": slug}, headers=headers)
    return http.request(method.upper(), filled, json={"orgSlug": slug}, headers=headers)


@pytest.mark.parametrize("role", ROLES)
def test_each_route_refuses_roles_below_its_least_and_admits_the_rest(http, document, org, people, role):
    checked = 0
    for (method, path), least in declared_roles(document).items():
        response = call(http, method, path, org.slug, people[role])
        if role_at_least(role, least):
            assert response.status_code != 403, (method, path, role, response.text)
        else:
            assert response.status_code == 403, (method, path, role, response.text)
            error = response.json()
            assert error["code"] == "insufficient_role"
            assert f"needs the {least} role" in error["message"] and f"acts as {role}" in error["message"]
        checked += 1
    assert checked > 70


def test_the_reference_lists_every_route_with_its_least_role(document):
    reference = (ROOT / "docs" / "reference.md").read_text()
    table = dict(
        re.findall(r"^\| `(\w+ /\S+)` \| (viewer|author|operator|admin) \|", reference, re.MULTILINE)
    )
    declared = {
        f"{method.upper()} {path.removeprefix('/api')}": role
        for (method, path), role in declared_roles(document).items()
    }
    assert table == declared


def test_a_lowered_role_takes_effect_on_the_next_request(server, client, org):
    member = client.members.create("ops@example.com", "Ops", "operator")
    key = client.api_keys.create("ops-key", member_id=member.id).key
    with OrgdeckClient(server.url, key, org_slug=org.slug) as ops:
        ops.environments.create("staging")
        client.members.update(member.id, role="viewer")
        with pytest.raises(Forbidden) as refused:
            ops.environments.create("production")
        assert refused.value.code == "insufficient_role"
        assert ops.whoami().role == "viewer"
        assert ops.whoami().key_role == "operator"


def test_a_deactivated_member_keys_stop_at_once(server, client, org):
    member = client.members.create("leaver@example.com", "Leaver", "author")
    keys = [client.api_keys.create(f"k{i}", member_id=member.id).key for i in range(2)]
    client.members.deactivate(member.id)
    for key in keys:
        with (
            OrgdeckClient(server.url, key, org_slug=org.slug, max_retries=0) as gone,
            pytest.raises(Unauthorized),
        ):
            gone.whoami()
    assert all(k.member is None or k.member.id != member.id for k in client.api_keys.list().items)
    assert client.members.get(member.id).active is False
    assert member.id not in [m.id for m in client.members.list().items]
    assert member.id in [m.id for m in client.members.list(include_inactive=True).items]


def test_a_key_is_made_up_to_its_makers_role(server, client, org, people):
    with OrgdeckClient(server.url, people["operator"], org_slug=org.slug) as operator:
        own = operator.api_keys.create("ci", role="author")
        assert own.role == "author" and own.member is not None and own.member.email == "operator@example.com"
        default = operator.api_keys.create("second")
        assert default.role == "operator"
        with pytest.raises(Forbidden) as above:
            operator.api_keys.create("root", role="admin")
        assert "needs the admin role" in above.value.message
        admin_member = client.members.list().items
        someone = next(m for m in admin_member if m.email == "viewer@example.com")
        with pytest.raises(Forbidden):
            operator.api_keys.create("for-them", member_id=someone.id)
        with pytest.raises(Forbidden):
            operator.api_keys.create("robot", service=True)
    service_key = client.api_keys.create("robot", service=True, role="operator")
    assert service_key.member is None and service_key.role == "operator"
    viewer = next(m for m in client.members.list().items if m.email == "viewer@example.com")
    with pytest.raises(BadRequest) as beyond:
        client.api_keys.create("too-strong", member_id=viewer.id, role="operator")
    assert beyond.value.details[0].field == "role"


def test_only_admins_revoke_other_peoples_keys(server, client, org, people):
    listed = {k.name: k for k in client.api_keys.list().items}
    with OrgdeckClient(server.url, people["operator"], org_slug=org.slug) as operator:
        spare = operator.api_keys.create("spare")
        operator.api_keys.revoke(spare.id)
        with pytest.raises(Forbidden):
            operator.api_keys.revoke(listed["author-laptop"].id)
    client.api_keys.revoke(listed["author-laptop"].id)


def test_the_last_admin_stays(client, org):
    admin = client.members.create("boss@example.com", "Boss", "admin")
    with pytest.raises(BadRequest) as demoted:
        client.members.update(admin.id, role="operator")
    assert demoted.value.code == "last_admin"
    with pytest.raises(BadRequest):
        client.members.deactivate(admin.id)
    second = client.members.create("deputy@example.com", "Deputy", "admin")
    assert client.members.update(admin.id, role="operator").role == "operator"
    assert client.members.get(second.id).role == "admin"


def test_members_are_unique_by_email_without_case(client):
    client.members.create("Dana@Example.com", "Dana", "viewer")
    with pytest.raises(BadRequest) as twice:
        client.members.create("dana@example.COM", "Dana again", "author")
    assert twice.value.code == "already_exists"


def test_whoami_names_the_member_and_the_role(server, client, org, people):
    with OrgdeckClient(server.url, people["author"], org_slug=org.slug) as author:
        me = author.whoami()
    assert me.role == "author" and me.member is not None and me.member.email == "author@example.com"
    service = client.whoami()
    assert service.member is None and service.role == "admin"
