from __future__ import annotations

import json

from api import OrgdeckClient
from tests.console.conftest import texts

PAGE = "pages/tools.py"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def seed_deployments(orgdeck: OrgdeckClient) -> None:
    for name in ("staging", "production"):
        orgdeck.environments.create(name)
    orgdeck.tools.create("Search tickets", "zendesk.search_tickets")
    orgdeck.tools.create("Refund", "stripe.refund")
    rollouts = [
        ("Search tickets", "zendesk.search_tickets", "production", "1.0"),
        ("Search tickets", "zendesk.search_tickets", "production", "1.1"),
        ("Search tickets", "zendesk.search_tickets", "staging", "1.2"),
        ("Refund", "stripe.refund", "production", "2.0"),
    ]
    for tool_name, tool_key, environment, version in rollouts:
        orgdeck.tool_deployments.record(
            tool_name=tool_name,
            tool_key=tool_key,
            environment=environment,
            provider="openai",
            tool_id=f"fn-{tool_key}",
            version=version,
            hash=f"h-{version}",
        )


def test_empty_state(console):
    app = console(PAGE)
    assert "No tools yet" in texts(app)
    assert "No tool deployment records yet" in texts(app)


def test_register_a_tool_with_a_schema(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_tool_name").input("Search the knowledge base")
    app.text_input(key="new_tool_key").input("kb.search")
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "locale": {}},
        "required": ["query"],
    }
    app.text_area[0].input(json.dumps(schema))
    next(b for b in app.button if b.label == "Register tool").click().run()
    assert not app.exception
    assert "Registered **Search the knowledge base**" in texts(app)
    table = app.dataframe[0].value
    assert list(table["Key"]) == ["kb.search"]
    assert list(table["Arguments (* required)"]) == ["query*, locale"]
    with org_client(server, org) as orgdeck:
        assert orgdeck.tools.list().items[0].input_schema == schema


def test_invalid_schema_is_explained_and_nothing_registered(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_tool_name").input("Broken")
    app.text_input(key="new_tool_key").input("broken")
    app.text_area(key="new_tool_schema").input("{not json")
    next(b for b in app.button if b.label == "Register tool").click().run()
    assert [e.value for e in app.error] == [
        "Input schema: not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"
    ]
    app.text_area(key="new_tool_schema").input('{"type": "array"}')
    next(b for b in app.button if b.label == "Register tool").click().run()
    [said] = [e.value for e in app.error]
    assert said.startswith("Input schema: must be a JSON Schema for an object")
    assert app.text_input(key="new_tool_name").value == "Broken"  # still as typed
    with org_client(server, org) as orgdeck:
        assert orgdeck.tools.list().total == 0


def test_edit_and_delete_a_tool(console, server, org):
    with org_client(server, org) as orgdeck:
        tool = orgdeck.tools.create("Refund", "stripe.refund")
    app = console(PAGE)
    edit_name = next(t for t in app.text_input if t.value == "Refund")
    edit_name.input("Refund a charge")
    next(b for b in app.button if b.label == "Save changes").click().run()
    assert "Saved **Refund a charge**" in texts(app)
    app.button(key=f"delete_tool_{tool.id}_start").click().run()
    assert "Records of its deployments stay" in texts(app)
    app.button(key=f"delete_tool_{tool.id}_confirm").click().run()
    assert not app.exception
    with org_client(server, org) as orgdeck:
        assert orgdeck.tools.list().total == 0


def test_deployments_filter_by_tool_and_environment_with_history(console, server, org):
    with org_client(server, org) as orgdeck:
        seed_deployments(orgdeck)
    app = console(PAGE)
    deployments = app.dataframe[1].value
    assert list(zip(deployments["Key"], deployments["Environment"], deployments["Version"], strict=True)) == [
        ("stripe.refund", "production", "2.0"),
        ("zendesk.search_tickets", "production", "1.1"),
        ("zendesk.search_tickets", "staging", "1.2"),
    ]
    assert len(app.get("plotly_chart")) == 1
    history = app.dataframe[2].value
    assert list(history["Version"]) == ["1.1", "1.0"]

    tool_filter = next(s for s in app.selectbox if s.label == "Tool" and "Search tickets" in s.options)
    tool_filter.select("Search tickets").run()
    assert set(app.dataframe[1].value["Key"]) == {"zendesk.search_tickets"}
    environment_filter = next(s for s in app.selectbox if s.label == "Environment")
    environment_filter.select("staging").run()
    assert list(app.dataframe[1].value["Version"]) == ["1.2"]
    assert "History of" not in [s.label for s in app.selectbox]  # staging has no earlier versions
