"""Chromium signs a member in to the console through the identity provider's own login page
(tests/oidc), and moves between pages as that member, with the role their groups give."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.browser.conftest import open_page, running_console
from tests.oidc_provider import CLIENT_SECRETS, CONSOLE_CLIENT, IdentityProvider

SECRETS = """
[auth]
redirect_uri = "{url}/oauth2callback"
cookie_secret = "%(cookie)s"
client_id = "%(client)s"
client_secret = "%(secret)s"
server_metadata_url = "%(issuer)s/.well-known/openid-configuration"
expose_tokens = ["id"]
# The provider knows no `select_account`, Streamlit's default prompt.
client_kwargs = { scope = "openid email profile groups", code_challenge_method = "S256", prompt = "login" }
"""


@pytest.fixture(scope="module")
def sso_console_url(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    signin_server,
    identity_provider: IdentityProvider,
) -> Iterator[str]:
    secrets = SECRETS % {
        "cookie": uuid.uuid4().hex,
        "client": CONSOLE_CLIENT,
        "secret": CLIENT_SECRETS[CONSOLE_CLIENT],
        "issuer": identity_provider.issuer,
    }
    with running_console(
        tmp_path_factory.mktemp("sso-console"), database_url, signin_server.url, secrets=secrets
    ) as url:
        identity_provider.allow_redirect(f"{url}/oauth2callback")
        yield url


def test_a_member_signs_in_through_the_identity_provider(
    page, sso_console_url, signin_server, identity_provider, org
):
    email = f"lee-{uuid.uuid4().hex[:10]}@acme.test"
    identity_provider.change_account("lee", email=email, groups=["orgdeck-operators"])
    with httpx.Client(base_url=signin_server.url, headers=org.headers, timeout=30) as api:
        member = {"orgSlug": org.slug, "email": email, "name": "Lee Operator", "role": "viewer"}
        assert api.post("/members", json=member).status_code == 200
        mapping = {"orgSlug": org.slug, "groupRoles": {"orgdeck-operators": "operator"}}
        assert api.put("/settings", json=mapping).status_code == 200

    open_page(page, sso_console_url, "", "Sign in")
    page.get_by_role("button", name="Sign in").click()
    # The provider's own login page.
    page.locator("input[name=login]").fill("lee")
    page.locator("input[name=password]").fill("any")
    page.locator("button[type=submit]").first.click()

    page.get_by_text(f"Lee Operator ({email})").first.wait_for(timeout=60_000)
    sidebar = page.locator("[data-testid=stSidebar]")
    assert "Role: operator" in sidebar.inner_text()
    assert org.slug in sidebar.inner_text()

    open_page(page, sso_console_url, "environments", f"Lee Operator ({email})")
    assert "Role: operator" in page.locator("[data-testid=stSidebar]").inner_text()
    open_page(page, sso_console_url, "members", email)
    assert "Role: operator" in page.locator("[data-testid=stSidebar]").inner_text()
