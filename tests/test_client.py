"""OrgdeckClient against a live service on loopback, and its retry rules against misbehaving peers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from api import OrgdeckClient
from api.errors import BadRequest, ConnectionFailed, Forbidden, RateLimited, ServerError, Unauthorized
from service.runtime.server import ServerThread
from tests.conftest import make_settings
from tests.processes import free_port, fresh_python_prints, http_peer


def test_health_whoami_and_keys(client, org):
    assert client.health().status == "ok"
    caller = client.whoami()
    assert caller.org_slug == org.slug
    created = client.api_keys.create("from-client")
    assert created.id in {k.id for k in client.api_keys.list().items}
    assert client.api_keys.revoke(created.id).revoked_at is not None


def test_org_slug_defaults_to_the_keys_own(server, org):
    with OrgdeckClient(server.url, org.key) as orgdeck:
        assert orgdeck.org_slug == org.slug
        assert orgdeck.api_keys.list().total >= 1


def test_errors_are_typed(server, client, org, other_org):
    with pytest.raises(BadRequest) as bad:
        client.api_keys.create("")
    assert bad.value.status == 400
    assert [(d.field, d.type) for d in bad.value.details] == [("name", "string_too_short")]
    assert bad.value.details[0].message
    with pytest.raises(Forbidden):
        client.api_keys.list(org_slug=other_org.slug)
    with OrgdeckClient(server.url, "odk_wrong") as anonymous, pytest.raises(Unauthorized) as unauthorized:
        anonymous.whoami()
    assert unauthorized.value.code == "unauthorized"


def test_retries_after_429_honouring_retry_after(tmp_path, database_url, db, org, other_org):
    server = ServerThread(make_settings(tmp_path, database_url, rate_limit=2, rate_limit_window_seconds=1))
    server.start()
    try:
        start_of_a_window()
        with OrgdeckClient(server.url, org.key, max_retries=3) as orgdeck:
            started = time.monotonic()
            for _ in range(3):
                orgdeck.whoami()
            assert time.monotonic() - started > 0.05  # it waited for the window to reset
        start_of_a_window()
        with OrgdeckClient(server.url, other_org.key, max_retries=0) as impatient:
            impatient.whoami()
            impatient.whoami()
            with pytest.raises(RateLimited) as limited:
                impatient.whoami()
            assert limited.value.retry_after is not None
    finally:
        server.stop()


def start_of_a_window() -> None:
    """Wait for a fresh one-second window, so three quick calls land in the same one even on a busy machine."""
    time.sleep(1 - time.time() % 1 + 0.01)


class _Flaky(BaseHTTPRequestHandler):
    """Answers 503 to the first N requests, then 200: a load balancer in front of a restarting service."""

    failures_left = 0
    seen = 0
    idempotency_keys: list[str | None] = []

    def _answer(self) -> None:
        type(self).seen += 1
        type(self).idempotency_keys.append(self.headers.get("Idempotency-Key"))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if type(self).failures_left > 0:
            type(self).failures_left -= 1
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        body = b'{"status": "ok", "database": "ok", "version": "test"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer
    do_PUT = _answer
    do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[ThreadingHTTPServer]:
    with http_peer(_Flaky) as peer:
        yield peer


def test_safe_methods_retry_on_503(flaky):
    _Flaky.failures_left, _Flaky.seen = 2, 0
    with OrgdeckClient(f"http://127.0.0.1:{flaky.server_port}/api", max_retries=3) as orgdeck:
        assert orgdeck.health().version == "test"
    assert _Flaky.seen == 3


def test_posts_retry_on_503_with_one_idempotency_key(flaky):
    _Flaky.failures_left, _Flaky.seen, _Flaky.idempotency_keys = 2, 0, []
    with OrgdeckClient(f"http://127.0.0.1:{flaky.server_port}/api", max_retries=3) as orgdeck:
        orgdeck.request("POST", "/anything", json={})
        assert _Flaky.seen == 3
        assert len(set(_Flaky.idempotency_keys)) == 1
        assert _Flaky.idempotency_keys[0] is not None
        # A key given by the caller is the one sent; the next call gets a key of its own.
        orgdeck.request("POST", "/anything", json={}, headers={"idempotency-key": "deploy-run-42"})
        orgdeck.request("POST", "/anything", json={})
    assert _Flaky.idempotency_keys[3] == "deploy-run-42"
    assert _Flaky.idempotency_keys[4] not in {None, "deploy-run-42", _Flaky.idempotency_keys[0]}


def test_a_client_that_never_retries_sends_no_key_of_its_own(flaky):
    _Flaky.failures_left, _Flaky.seen, _Flaky.idempotency_keys = 0, 0, []
    with OrgdeckClient(f"http://127.0.0.1:{flaky.server_port}/api", max_retries=0) as orgdeck:
        orgdeck.request("POST", "/anything", json={})
        orgdeck.request("PATCH", "/anything", json={}, headers={"Idempotency-Key": "deploy-run-43"})
    assert _Flaky.idempotency_keys == [None, "deploy-run-43"]


def test_writes_without_a_key_do_not_retry_on_503(flaky):
    _Flaky.failures_left, _Flaky.seen, _Flaky.idempotency_keys = 2, 0, []
    orgdeck = OrgdeckClient(f"http://127.0.0.1:{flaky.server_port}/api", max_retries=3)
    with orgdeck, pytest.raises(ServerError):
        orgdeck.request("PUT", "/anything", json={})
    assert _Flaky.seen == 1
    assert _Flaky.idempotency_keys == [None]


def test_unreachable_service_is_connection_failed():
    orgdeck = OrgdeckClient(f"http://127.0.0.1:{free_port()}/api", max_retries=1)
    with orgdeck, pytest.raises(ConnectionFailed, match="Could not reach"):
        orgdeck.health()


class _OddErrors(BaseHTTPRequestHandler):
    """A peer (a proxy, an older service) whose error details are not all in the documented shape."""

    def do_GET(self) -> None:
        body = (
            b'{"message": "bad", "code": "invalid_request", "details": '
            b'[{"field": "name", "message": "is required", "type": "missing"}, "text", {"field": "x"}]}'
        )
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_error_details_keep_only_the_documented_shape():
    with (
        http_peer(_OddErrors) as peer,
        OrgdeckClient(f"http://127.0.0.1:{peer.server_port}/api") as orgdeck,
        pytest.raises(BadRequest) as bad,
    ):
        orgdeck.health()
    assert [(d.field, d.message, d.type) for d in bad.value.details] == [("name", "is required", "missing")]


def test_the_client_loads_without_httpxs_command_line():
    # A fresh interpreter: click and rich (httpx's command line) stay out, and the client works.
    program = (
        "import sys\n"
        "from api import OrgdeckClient\n"
        "OrgdeckClient('http://127.0.0.1:9/api').close()\n"
        "print(sorted({'click', 'rich'} & set(sys.modules)))\n"
    )
    assert fresh_python_prints(program) == ["[]"]


def test_an_answers_validator_is_built_when_one_is_first_read():
    # A fresh interpreter: importing the client builds none of the hundreds of answers' validators
    # (a process reads a few kinds); the first answer read builds its own, and reads it right.
    program = (
        "import api\n"
        "from api.common import Record\n"
        "from api.system import Health\n"
        "def kinds(cls): return [cls, *(kind for sub in cls.__subclasses__() for kind in kinds(sub))]\n"
        "print(len(kinds(Record)) > 100, [kind.__name__ for kind in kinds(Record) if kind.__pydantic_complete__])\n"
        "health = Health.model_validate({'status': 'ok', 'database': 'ok', 'version': '1.0.0'})\n"
        "print(health.status, [kind.__name__ for kind in kinds(Record) if kind.__pydantic_complete__])\n"
    )
    assert fresh_python_prints(program) == ["True []", "ok ['Health']"]
