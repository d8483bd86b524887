"""The client answers each operation's least role from the service's OpenAPI document, read once."""

from __future__ import annotations

import httpx
import pytest

from api import OrgdeckClient


def test_least_roles_come_from_the_document_once(server, org):
    requests: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda request: requests.append(request.url.path)]})
    with OrgdeckClient(server.url, org.key, http_client=http) as client:
        document = httpx.get(server.url + "/openapi.json").json()
        expected = {
            operation["operationId"]: operation.get("x-least-role")
            for item in document["paths"].values()
            for operation in item.values()
        }
        assert {op: client.least_role(op) for op in expected} == expected
        assert client.least_role("createMember") == "admin"
        assert client.least_role("deleteTool") == "operator"
        assert client.least_role("listAgents") == "viewer"
        assert client.least_role("health") is None
        with pytest.raises(KeyError, match="deleteTools"):
            client.least_role("deleteTools")
    assert requests.count("/api/openapi.json") == 1
    http.close()
