"""The OpenID Connect provider of the sign-in tests: the `oidc-provider` package under Node
(tests/oidc/provider.mjs), started once per test session, and the ways to get its tokens: a person
signs in through its login page (the authorization code flow, driven over HTTP), a CI job asks
for its own token with client_credentials."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from tests.processes import free_port

FOLDER = Path(__file__).resolve().parent / "oidc"
CALLBACK = "http://127.0.0.1/callback"
CONSOLE_CLIENT = "orgdeck-console"
CI_AUDIENCE = "urn:orgdeck:ci"
CLIENT_SECRETS = {
    "orgdeck-console": "console-secret",
    "other-app": "other-secret",
    "ci-main": "ci-main-secret",
    "ci-fork": "ci-fork-secret",
}
_FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"')
_HIDDEN_FIELD = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def install() -> None:
    """Install the provider's Node packages once, where Node and npm are at hand and they are not
    yet: the README's test command then needs nothing more (without Node, its tests skip)."""
    if shutil.which("npm") is None or (FOLDER / "node_modules" / "oidc-provider").is_dir():
        return
    subprocess.run(
        ["npm", "ci", "--prefix", str(FOLDER), "--no-audit", "--no-fund"],
        check=False,
        capture_output=True,
        timeout=300,
    )


def missing_part() -> str | None:
    """Why the provider cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (FOLDER / "node_modules" / "oidc-provider").is_dir():
        return "its packages are not installed: run `npm ci --prefix tests/oidc`"
    return None


@dataclass(frozen=True)
class IdentityProvider:
    issuer: str
    # An unrelated provider: its tokens are well signed, by an issuer nobody trusts.
    other_issuer: str

    def id_token(self, account: str, *, client_id: str = CONSOLE_CLIENT, issuer: str | None = None) -> str:
        """An ID token of `account` for `client_id`, from signing in at the provider's login page."""
        issuer = issuer or self.issuer
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        with httpx.Client(timeout=10) as browser:
            answer = browser.get(
                f"{issuer}/auth",
                params={
                    "client_id": client_id,
                    "response_type": "code",
                    "scope": "openid email profile groups",
                    "redirect_uri": CALLBACK,
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                    "state": secrets.token_urlsafe(8),
                    "nonce": secrets.token_urlsafe(8),
                },
            )
            while True:
                if answer.is_redirect:
                    location = urljoin(str(answer.url), answer.headers["location"])
                    if location.startswith(CALLBACK):
                        code = parse_qs(urlsplit(location).query)["code"][0]
                        break
                    answer = browser.get(location)
                    continue
                answer.raise_for_status()
                action = _FORM_ACTION.search(answer.text)
                assert action, f"no form on the provider's page: {answer.text[:500]}"
                fields = dict(_HIDDEN_FIELD.findall(answer.text))
                if fields.get("prompt") == "login":
                    fields |= {"login": account, "password": "any"}
                answer = browser.post(urljoin(str(answer.url), action[1]), data=fields)
            tokens = browser.post(
                f"{issuer}/token",
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": CALLBACK,
                    "code_verifier": verifier,
                },
                auth=(client_id, CLIENT_SECRETS[client_id]),
            )
            tokens.raise_for_status()
            return tokens.json()["id_token"]

    def job_token(self, job: str, *, audience: str = CI_AUDIENCE, issuer: str | None = None) -> str:
        """A CI job's own token (a JWT with its repository and ref), as its platform issues it."""
        answer = httpx.post(
            f"{issuer or self.issuer}/token",
            data={"grant_type": "client_credentials", "resource": audience, "scope": "deploy"},
            auth=(job, CLIENT_SECRETS[job]),
            timeout=10,
        )
        answer.raise_for_status()
        return answer.json()["access_token"]

    def rotate_keys(self) -> str:
        """Sign with a new key from now on; its kid."""
        return httpx.post(f"{self.issuer}/test/rotate", timeout=10).raise_for_status().json()["kid"]

    def allow_redirect(self, uri: str) -> None:
        """Let the clients redirect to `uri` (a console's /oauth2callback) after signing in."""
        httpx.post(f"{self.issuer}/test/redirect-uris", json={"uri": uri}, timeout=10).raise_for_status()

    def change_account(self, account: str, **claims: object) -> None:
        httpx.put(f"{self.issuer}/test/accounts/{account}", json=claims, timeout=10).raise_for_status()


@contextmanager
def running_provider() -> Iterator[IdentityProvider]:
    port, other_port = free_port(), free_port()
    process = subprocess.Popen(
        ["node", str(FOLDER / "provider.mjs"), str(port), str(other_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "ready":
                break
        else:
            raise RuntimeError("the OpenID Connect provider stopped before it was ready")
        yield IdentityProvider(
            issuer=f"http://127.0.0.1:{port}", other_issuer=f"http://127.0.0.1:{other_port}"
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
