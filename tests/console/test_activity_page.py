"""Activity: the audit trail with its filters, paging, links to targets and the chart per day."""

from __future__ import annotations

import json
from datetime import date, timedelta

from api import OrgdeckClient
from tests.console.conftest import select_row, texts

PAGE = "pages/activity.py"


def make_changes(server, org) -> dict[str, str]:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        dana = admin.members.create("dana@example.com", "Dana Reyes", "author")
        dana_key = admin.api_keys.create("dana-laptop", member_id=dana.id).key
        environment = admin.environments.create("staging")
    with OrgdeckClient(server.url, dana_key, org_slug=org.slug) as as_dana:
        agent = as_dana.agents.create("triage", "openai", provider_config={"model": "m"})
        as_dana.agents.update("triage", name="Triage bot")
    return {"member": dana.id, "environment": environment.id, "agent": agent.id}


def test_lists_changes_newest_first_with_chart_and_opens_the_target(console, server, org):
    ids = make_changes(server, org)
    app = console(PAGE)
    table = app.dataframe[0].value
    # Opening the console signed in (recorded first of all), after Dana's two changes.
    assert list(table["Action"])[:3] == ["signIn", "updateAgent", "createAgent"]
    assert list(table["Actor"])[:3] == ["service key admin", "dana@example.com", "dana@example.com"]
    assert len(app.get("plotly_chart")) == 1
    assert "6 changes in these days" in texts(app)
    select_row(app, "activity_table", 1)
    assert "updateAgent" in app.subheader[0].value
    link = next(e for e in app.get("page_link") if "Open agent" in e.proto.label)
    assert link.proto.page.endswith("agents")
    assert f"open={ids['agent']}" in link.proto.query_string
    assert '"name": "Triage bot"' in app.code[0].value


def test_filters_narrow_the_list(console, server, org):
    make_changes(server, org)
    app = console(PAGE)
    app.selectbox(key="activity_actor").select("dana@example.com").run()
    assert set(app.dataframe[0].value["Actor"]) == {"dana@example.com"}
    app.selectbox(key="activity_actor").select("Any").run()
    app.selectbox(key="activity_target_type").select("environment").run()
    assert list(app.dataframe[0].value["Action"]) == ["createEnvironment"]
    app.text_input(key="activity_action").input("deleteTool").run()
    assert "No change matches these filters" in texts(app)


def test_pages_walk_with_the_cursor(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        for n in range(55):
            admin.tools.create(f"Tool {n}", f"tool-{n}")
    app = console(PAGE)
    first = list(app.dataframe[0].value["Target"])
    # The sign-in, then the tools.
    assert first == ["api key admin", *(f"tool Tool {n}" for n in range(54, 5, -1))]
    back = app.button(key="activity_pages_back")
    assert back.disabled and back.help == "This is the first page."
    app.button(key="activity_pages_forward").click().run()
    forward = app.button(key="activity_pages_forward")
    assert forward.disabled and forward.help == "This is the last page."
    second = list(app.dataframe[0].value["Target"])
    assert second == [f"tool Tool {n}" for n in range(5, -1, -1)]
    select_row(app, "activity_table", 1)
    assert "Tool 4" in app.subheader[0].value
    app.button(key="activity_pages_back").click().run()
    assert list(app.dataframe[0].value["Target"]) == first


def test_empty_and_service_down(console, server, org, monkeypatch):
    app = console(PAGE)
    long_ago = date.today() - timedelta(days=200)
    app.date_input(key="activity_dates").set_value((long_ago, long_ago + timedelta(days=3))).run()
    assert "No changes in these days" in texts(app)
    assert not app.get("plotly_chart") and not app.dataframe
    monkeypatch.setenv("ORGDECK_API_URL", "http://127.0.0.1:9/api")
    down = console(PAGE)
    assert any("Is the service running" in e.value for e in down.error)


def test_the_chart_follows_the_filters_and_gives_each_action_its_own_colour(console, server, org):
    make_changes(server, org)
    app = console(PAGE)
    bars = app.get("plotly_chart")[0]
    spec = json.loads(bars.proto.spec)
    colours = {trace["name"]: trace["marker"]["color"] for trace in spec["data"]}
    assert len(set(colours.values())) == len(colours)  # no two actions share a colour
    assert spec["layout"]["legend"]["x"] > 1  # beside the plot, not over the axis
    app.selectbox(key="activity_actor").select("dana@example.com").run()
    spec = json.loads(app.get("plotly_chart")[0].proto.spec)
    assert {trace["name"] for trace in spec["data"]} == {"createAgent", "updateAgent"}
    assert "2 changes in these days matching the filters" in texts(app)
