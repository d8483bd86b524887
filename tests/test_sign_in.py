"""Sign-in with OpenID Connect tokens, against a real provider on loopback (tests/oidc): a person's
ID token acts as the member with its verified email and the role their groups give; refused tokens
are 401 with their code; a CI job's own token acts as the trusted workload whose conditions it meets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from service.runtime.server import ServerThread
from service.signin.keysets import IssuerKeys
from tests.conftest import Org
from tests.oidc_provider import IdentityProvider
from tests.processes import ROOT


@pytest.fixture
def api(signin_server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=signin_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def person(identity_provider: IdentityProvider) -> Iterator[str]:
    """Dana, with an address of this test's own (a person is a member of one organization here)."""
    email = f"dana-{uuid.uuid4().hex[:10]}@acme.test"
    identity_provider.change_account("dana", email=email, groups=["orgdeck-admins"])
    yield email


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def add_member(api: httpx.Client, org: Org, email: str, role: str) -> dict:
    answer = api.post(
        "/members",
        headers=org.headers,
        json={"orgSlug": org.slug, "email": email, "name": "Dana", "role": role},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def refusal(answer: httpx.Response) -> str:
    assert answer.status_code == 401, answer.text
    return answer.json()["code"]


def test_a_members_token_acts_as_the_member_with_their_role(api, org, identity_provider, person):
    member = add_member(api, org, person, "operator")
    token = identity_provider.id_token("dana")

    whoami = api.get("/whoami", headers=bearer(token)).json()
    assert whoami["via"] == "oidc"
    assert whoami["member"]["email"] == person
    assert (whoami["orgSlug"], whoami["role"]) == (org.slug, "operator")
    # Operator may create an environment, not a member.
    created = api.post("/environments", headers=bearer(token), json={"orgSlug": org.slug, "name": "staging"})
    assert created.status_code == 200, created.text
    denied = api.post(
        "/members",
        headers=bearer(token),
        json={"orgSlug": org.slug, "email": "x@acme.test", "name": "X", "role": "viewer"},
    )
    assert denied.status_code == 403

    events = api.get("/audit-events", headers=org.headers, params={"orgSlug": org.slug}).json()["items"]
    by_action = {event["action"]: event for event in events}
    assert by_action["createEnvironment"]["actor"]["via"] == "oidc"
    assert by_action["createEnvironment"]["actor"]["memberId"] == member["id"]
    assert by_action["signIn"]["actor"]["memberEmail"] == person


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("wrong audience", "invalid_token"),
        ("wrong issuer", "invalid_token"),
        ("bad signature", "invalid_token"),
    ],
)
def test_tokens_not_for_this_service_are_refused(api, org, identity_provider, person, case, code):
    add_member(api, org, person, "admin")
    if case == "wrong audience":
        token = identity_provider.id_token("dana", client_id="other-app")
    elif case == "wrong issuer":
        token = identity_provider.id_token("dana", issuer=identity_provider.other_issuer)
    else:
        header, payload, signature = identity_provider.id_token("dana").split(".")
        flipped = "A" if signature[10] != "A" else "B"
        token = ".".join([header, payload, signature[:10] + flipped + signature[11:]])
    assert refusal(api.get("/whoami", headers=bearer(token))) == code


def test_an_expired_token_is_refused(api, org, identity_provider, person):
    add_member(api, org, person, "admin")
    identity_provider.change_account("dana", token_ttl=1)
    token = identity_provider.id_token("dana")
    identity_provider.change_account("dana", token_ttl=None)
    # The token lives one second and the service allows no clock skew.
    time.sleep(2.1)
    assert refusal(api.get("/whoami", headers=bearer(token))) == "token_expired"


def test_unknown_and_removed_members_are_refused(api, org, identity_provider, person):
    assert refusal(api.get("/whoami", headers=bearer(identity_provider.id_token("dana")))) == "unknown_member"

    member = add_member(api, org, person, "viewer")
    token = identity_provider.id_token("dana")
    assert api.get("/whoami", headers=bearer(token)).status_code == 200
    removed = api.delete(f"/members/{member['id']}", headers=org.headers, params={"orgSlug": org.slug})
    assert removed.status_code == 200
    assert refusal(api.get("/whoami", headers=bearer(token))) == "member_deactivated"


def test_a_new_signing_key_at_the_provider_is_followed(api, org, identity_provider, person):
    add_member(api, org, person, "viewer")
    assert api.get("/whoami", headers=bearer(identity_provider.id_token("dana"))).status_code == 200
    kid = identity_provider.rotate_keys()
    token = identity_provider.id_token("dana")
    assert kid in httpx.get(f"{identity_provider.issuer}/jwks").text
    answer = api.get("/whoami", headers=bearer(token))
    assert answer.status_code == 200, answer.text


def test_groups_give_the_role_and_losing_a_group_loses_it(api, org, identity_provider, person):
    add_member(api, org, person, "viewer")
    mapping = {"orgdeck-admins": "admin", "orgdeck-operators": "operator"}
    updated = api.put("/settings", headers=org.headers, json={"orgSlug": org.slug, "groupRoles": mapping})
    assert updated.status_code == 200, updated.text
    assert updated.json()["groupRoles"] == mapping

    identity_provider.change_account("dana", groups=["orgdeck-operators", "orgdeck-admins"])
    assert api.get("/whoami", headers=bearer(identity_provider.id_token("dana"))).json()["role"] == "admin"
    identity_provider.change_account("dana", groups=["orgdeck-operators"])
    assert api.get("/whoami", headers=bearer(identity_provider.id_token("dana"))).json()["role"] == "operator"
    identity_provider.change_account("dana", groups=[])
    assert api.get("/whoami", headers=bearer(identity_provider.id_token("dana"))).json()["role"] == "viewer"

    events = api.get(
        "/audit-events", headers=org.headers, params={"orgSlug": org.slug, "action": "updateSettings"}
    )
    assert events.json()["items"][0]["changes"] == {"groupRoles": mapping}


def test_people_of_an_allowed_domain_become_members_on_first_sign_in(api, org, identity_provider):
    domain = f"d{uuid.uuid4().hex[:10]}.test"
    identity_provider.change_account("newcomer", email=f"newcomer@{domain}", groups=[])
    token = identity_provider.id_token("newcomer")
    assert refusal(api.get("/whoami", headers=bearer(token))) == "unknown_member"

    settings = {"orgSlug": org.slug, "signInDomains": [domain], "signInDefaultRole": "author"}
    assert api.put("/settings", headers=org.headers, json=settings).status_code == 200
    whoami = api.get("/whoami", headers=bearer(token)).json()
    assert (whoami["orgSlug"], whoami["role"], whoami["member"]["email"]) == (
        org.slug,
        "author",
        f"newcomer@{domain}",
    )
    listed = api.get("/members", headers=org.headers, params={"orgSlug": org.slug}).json()["items"]
    assert [m["role"] for m in listed if m["email"] == f"newcomer@{domain}"] == ["author"]
    actions = [
        e["action"]
        for e in api.get("/audit-events", headers=org.headers, params={"orgSlug": org.slug}).json()["items"]
    ]
    assert "provisionMember" in actions


def test_an_unverified_email_is_refused(api, org, identity_provider):
    email = f"unverified-{uuid.uuid4().hex[:10]}@acme.test"
    identity_provider.change_account("unverified", email=email)
    add_member(api, org, email, "admin")
    assert (
        refusal(api.get("/whoami", headers=bearer(identity_provider.id_token("unverified"))))
        == "email_unverified"
    )


def test_sign_out_ends_the_tokens_session(api, org, identity_provider, person):
    add_member(api, org, person, "viewer")
    token = identity_provider.id_token("dana")
    assert api.get("/whoami", headers=bearer(token)).status_code == 200
    signed_out = api.post("/sign-out", headers=bearer(token))
    assert signed_out.status_code == 200, signed_out.text
    assert refusal(api.get("/whoami", headers=bearer(token))) == "signed_out"
    actions = [
        e["action"]
        for e in api.get("/audit-events", headers=org.headers, params={"orgSlug": org.slug}).json()["items"]
    ]
    assert actions[:2] == ["signOut", "signIn"]
    # An API key has no session to end.
    assert api.post("/sign-out", headers=org.headers).json()["code"] == "not_signed_in"


@pytest.fixture
def ci_audience() -> str:
    """An audience of this test's own: trusted workloads of every organization share the issuer, and
    the oldest whose conditions a token meets is the one it acts as."""
    return f"urn:orgdeck:ci:{uuid.uuid4().hex[:10]}"


def workload(api: httpx.Client, org: Org, issuer: str, audience: str, **overrides: object) -> dict:
    body = {
        "orgSlug": org.slug,
        "name": f"deploy-{uuid.uuid4().hex[:6]}",
        "issuer": issuer,
        "audience": audience,
        "conditions": [
            {"claim": "repository", "equals": "acme/agents"},
            {"claim": "ref", "matches": "refs/heads/*"},
        ],
        "role": "operator",
    } | overrides
    answer = api.post("/workload-identities", headers=org.headers, json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_ci_jobs_token_acts_as_the_workload_whose_conditions_it_meets(
    api, org, identity_provider, ci_audience
):
    trusted = workload(api, org, identity_provider.issuer, ci_audience)
    token = identity_provider.job_token("ci-main", audience=ci_audience)

    whoami = api.get("/whoami", headers=bearer(token)).json()
    assert (whoami["via"], whoami["keyId"], whoami["role"]) == ("workload", trusted["id"], "operator")
    created = api.post("/environments", headers=bearer(token), json={"orgSlug": org.slug, "name": "ci"})
    assert created.status_code == 200, created.text
    event = api.get(
        "/audit-events", headers=org.headers, params={"orgSlug": org.slug, "action": "createEnvironment"}
    ).json()["items"][0]
    assert event["actor"]["via"] == "workload"
    assert event["actor"]["claims"] == {
        "sub": "ci-main",
        "repository": "acme/agents",
        "ref": "refs/heads/main",
    }
    assert (
        refusal(
            api.get("/whoami", headers=bearer(identity_provider.job_token("ci-fork", audience=ci_audience)))
        )
        == "workload_not_trusted"
    )

    api.delete(f"/workload-identities/{trusted['id']}", headers=org.headers, params={"orgSlug": org.slug})
    after = api.get("/whoami", headers=bearer(identity_provider.job_token("ci-main", audience=ci_audience)))
    # invalid_token when no workload of the issuer is left (other tests' may be, for other audiences).
    assert refusal(after) in {"workload_not_trusted", "invalid_token"}


def test_a_workloads_issuer_needs_no_configuration_of_the_service(api, org, identity_provider, ci_audience):
    """The service knows only the company's issuer; a CI platform's is the organization's choice."""
    trusted = workload(api, org, identity_provider.other_issuer, ci_audience)
    token = identity_provider.job_token(
        "ci-main", audience=ci_audience, issuer=identity_provider.other_issuer
    )
    whoami = api.get("/whoami", headers=bearer(token))
    assert whoami.status_code == 200, whoami.text
    assert (whoami.json()["via"], whoami.json()["keyId"]) == ("workload", trusted["id"])


def test_workload_identities_are_managed_by_admins(api, org, identity_provider, ci_audience):
    trusted = workload(api, org, identity_provider.issuer, ci_audience)
    params = {"orgSlug": org.slug}
    assert (
        api.get(f"/workload-identities/{trusted['id']}", headers=org.headers, params=params).json() == trusted
    )
    changed = api.patch(
        f"/workload-identities/{trusted['id']}",
        headers=org.headers,
        json={"orgSlug": org.slug, "role": "viewer"},
    )
    assert changed.json()["role"] == "viewer"
    assert [
        w["id"] for w in api.get("/workload-identities", headers=org.headers, params=params).json()["items"]
    ] == [trusted["id"]]
    created = ("name", "issuer", "audience", "conditions", "role")
    again = {"orgSlug": org.slug, "name": "again"} | {field: trusted[field] for field in created[1:]}
    for field, wrong, named in (
        ("conditions", [{"claim": "ref"}], "conditions.0"),
        ("issuer", "https://[::1/", "issuer"),  # an unclosed bracket: no URL at all
    ):
        bad = api.post("/workload-identities", headers=org.headers, json=again | {field: wrong})
        assert bad.status_code == 400, bad.text
        assert [detail["field"] for detail in bad.json()["details"]] == [named], bad.text
    viewer_key = api.post(
        "/api-keys", headers=org.headers, json={"orgSlug": org.slug, "name": "v", "role": "viewer"}
    ).json()["key"]
    assert (
        api.get("/workload-identities", headers={"X-API-Key": viewer_key}, params=params).status_code == 403
    )


def test_api_keys_keep_working_beside_tokens(api, org):
    assert api.get("/whoami", headers=org.headers).json()["via"] == "key"
    assert api.get("/whoami", headers={"Authorization": f"Bearer {org.key}"}).json()["via"] == "key"
    assert refusal(api.get("/whoami", headers=bearer("odk_not-a-key"))) == "unauthorized"


class GitHubTokenService:
    """GitHub Actions' token service for a job, on loopback: answers the job's OpenID Connect token
    (one the provider issued) to a request with the job's request token and an audience."""

    REQUEST_TOKEN = "runner-request-token"

    def __init__(self, job_token: str) -> None:
        self.audiences: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != f"bearer {outer.REQUEST_TOKEN}":
                    self.send_error(401)
                    return
                outer.audiences += parse_qs(urlsplit(self.path).query).get("audience", [])
                body = json.dumps({"value": job_token}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/token?api-version=2.0"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_orgdeck_in_a_pipeline_uses_the_jobs_token_instead_of_a_key(
    api, org, identity_provider, signin_server, tmp_path, ci_audience
):
    trusted = workload(api, org, identity_provider.issuer, ci_audience)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORGDECK_", "ACTIONS_"))}
    env |= {"ORGDECK_CONFIG": str(tmp_path / "config.json"), "ORGDECK_API_URL": signin_server.url}

    def orgdeck(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "api", "whoami", "--json"],
            cwd=ROOT,
            env=env | extra,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    github = GitHubTokenService(identity_provider.job_token("ci-main", audience=ci_audience))
    try:
        ran = orgdeck(
            ACTIONS_ID_TOKEN_REQUEST_URL=github.url,
            ACTIONS_ID_TOKEN_REQUEST_TOKEN=GitHubTokenService.REQUEST_TOKEN,
            ORGDECK_OIDC_AUDIENCE=ci_audience,
        )
    finally:
        github.close()
    assert ran.returncode == 0, ran.stderr
    assert (json.loads(ran.stdout)["via"], json.loads(ran.stdout)["keyId"]) == ("workload", trusted["id"])
    assert github.audiences == [ci_audience]

    ran = orgdeck(ORGDECK_OIDC_TOKEN=identity_provider.job_token("ci-main", audience=ci_audience))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["keyId"] == trusted["id"]

    refused = orgdeck(ORGDECK_OIDC_TOKEN=identity_provider.job_token("ci-fork", audience=ci_audience))
    assert refused.returncode == 3  # auth
    assert json.loads(refused.stdout)["error"]["code"] == "workload_not_trusted"


def test_unknown_key_ids_fetch_the_issuers_keys_at_most_once_per_interval(identity_provider):
    fetched: list[str] = []
    keys = IssuerKeys(timeout_seconds=10, refresh_seconds=3600, check_url=fetched.append)
    kept = keys.for_key_id(identity_provider.issuer, None)
    assert [url.rsplit("/", 1)[1] for url in fetched] == ["openid-configuration", "jwks"]
    for _ in range(5):
        assert keys.for_key_id(identity_provider.issuer, f"made-up-{uuid.uuid4().hex}") is kept
    assert len(fetched) == 2

    keys.refresh_seconds = 0
    kid = identity_provider.rotate_keys()
    assert kid in {key.kid for key in keys.for_key_id(identity_provider.issuer, kid)}
    assert len(fetched) == 4
