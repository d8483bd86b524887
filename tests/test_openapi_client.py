"""The OpenAPI document names every operation once and feeds a client generator without losses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
OPERATION_ID = re.compile(r"^[a-z][A-Za-z]{1,39}$")


@pytest.fixture(scope="module")
def document(server) -> dict:
    return httpx.get(server.url + "/openapi.json").json()


def operations(document: dict) -> list[tuple[str, str, dict]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_every_operation_has_a_short_unique_camel_case_id(document):
    ids = [operation["operationId"] for _method, _path, operation in operations(document)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert [i for i in ids if not OPERATION_ID.match(i)] == []
    by_route = {
        f"{method} {path}": operation["operationId"] for method, path, operation in operations(document)
    }
    assert by_route["POST /api/environments"] == "createEnvironment"
    assert by_route["POST /api/agents/deployments/preview"] == "previewDeployment"
    assert by_route["GET /api/registries/artifacts/versions"] == "listArtifactVersions"
    assert by_route["GET /api/agents/{stableKey}/versions"] == "listAgentVersions"


def test_generated_client_builds_without_losses_and_works(document, server, org, tmp_path):
    if not GENERATOR.exists():
        pytest.fail("openapi-python-client is missing: install requirements-dev.txt", pytrace=False)
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "package_name_override": "orgdeck_generated",
                "post_hooks": [],
                # The audit export streams NDJSON, which the generator takes as bytes.
                "content_type_overrides": {"application/x-ndjson": "application/octet-stream"},
            }
        )
    )
    generated = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            "openapi.json",
            "--config",
            "config.json",
            "--meta",
            "none",
            "--output-path",
            "orgdeck_generated",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    # Any schema or operation the generator could not process is reported as a warning.
    assert "Warning" not in generated.stdout + generated.stderr, generated.stdout + generated.stderr

    script = textwrap.dedent(
        """
        import json, sys
        from orgdeck_generated import AuthenticatedClient
        from orgdeck_generated.api.service import whoami
        from orgdeck_generated.api.environments_and_secrets import create_environment, list_environments
        from orgdeck_generated.api.notifications import create_channel, list_channels
        from orgdeck_generated.models import CreateEnvironment, CreateChannel, ListEnvironments

        base_url, key, slug = sys.argv[1:]
        client = AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
        caller = whoami.sync(client=client)
        created = create_environment.sync(
            client=client, body=CreateEnvironment(org_slug=slug, name="generated"), idempotency_key="gen-1"
        )
        listed = list_environments.sync(client=client, body=ListEnvironments(org_slug=slug))
        channel = create_channel.sync(
            client=client,
            body=CreateChannel.from_dict(
                {"orgSlug": slug, "name": "ops", "kind": "webhook", "config": {"url": "http://127.0.0.1:9/hook"}}
            ),
        )
        channels = list_channels.sync(client=client, org_slug=slug)
        print(json.dumps({
            "org": caller.org_slug,
            "environment": created.id,
            "environments": [e.id for e in listed.items],
            "channel": channel.id,
            "channels": [(c.id, c.kind.value, c.config.to_dict()) for c in channels.items],
        }))
        """
    )
    base_url = server.url.removesuffix("/api")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    called = subprocess.run(
        [sys.executable, "-c", script, base_url, org.key, org.slug],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert called.returncode == 0, called.stderr
    answer = json.loads(called.stdout)
    assert answer["org"] == org.slug
    assert answer["environments"] == [answer["environment"]]
    assert answer["channels"] == [[answer["channel"], "webhook", {"url": "http://127.0.0.1:9/hook"}]]
