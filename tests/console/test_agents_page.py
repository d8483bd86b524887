from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import select_row, texts

PAGE = "pages/agents.py"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def labelled(widgets, label: str):
    return next(w for w in widgets if w.label == label)


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def seed(server, org) -> str:
    """Three agents, one in a fleet, one with two versions; returns the fleet's id."""
    with org_client(server, org) as orgdeck:
        fleet = orgdeck.fleets.create("Support")
        orgdeck.agents.create(
            "support-triage",
            "openai",
            name="Support triage",
            tags=["support", "tier-1"],
            provider_config={"model": "gpt-4o-mini", "temperature": 0.4},
            fleet_id=fleet.id,
        )
        orgdeck.agents.snapshot("support-triage")
        orgdeck.agents.update("support-triage", provider_config={"model": "gpt-4o", "temperature": 0.4})
        orgdeck.agents.snapshot("support-triage")
        orgdeck.agents.create("refund-assistant", "anthropic", tags=["support", "billing"], fleet_id=fleet.id)
        orgdeck.agents.create("code-reviewer", "anthropic", tags=["engineering"])
        return fleet.id


def test_empty_state_invites_a_first_agent(console):
    app = console(PAGE)
    assert "No agents yet" in texts(app)
    assert not app.dataframe


def test_lists_agents_with_fleet_and_version_state(console, server, org):
    seed(server, org)
    app = console(PAGE)
    table = app.dataframe[0].value
    assert list(table["Key"]) == ["code-reviewer", "refund-assistant", "support-triage"]
    row = table.set_index("Key").loc["support-triage"]
    assert (row["Fleet"], row["Model"], row["Version"], row["Unversioned edits"]) == (
        "Support",
        "gpt-4o",
        "v2",
        False,
    )
    never = table.set_index("Key").loc["code-reviewer"]
    assert never["Version"] == ""
    assert never["Unversioned edits"]


def test_filters_narrow_the_table(console, server, org):
    seed(server, org)
    app = console(PAGE)
    labelled(app.multiselect, "Tags (all must match)").select("support").run()
    assert list(app.dataframe[0].value["Key"]) == ["refund-assistant", "support-triage"]
    labelled(app.selectbox, "Provider").select("anthropic").run()
    assert list(app.dataframe[0].value["Key"]) == ["refund-assistant"]
    assert "1 of 3 agents" in texts(app)
    labelled(app.selectbox, "Provider").select(None).run()
    app.text_input(key="agent_search").input("TRIAGE").run()
    assert list(app.dataframe[0].value["Key"]) == ["support-triage"]
    app.text_input(key="agent_search").input("nothing-like-this").run()
    assert "No agent matches these filters" in texts(app)


def test_filter_by_fleet(console, server, org):
    fleet_id = seed(server, org)
    app = console(PAGE)
    labelled(app.selectbox, "Fleet").select(fleet_id).run()
    assert list(app.dataframe[0].value["Key"]) == ["refund-assistant", "support-triage"]


def test_create_an_agent(console, server, org):
    app = console(PAGE)
    labelled(app.text_input, "Stable key").input("kb-answerer")
    labelled(app.text_input, "Name").input("Knowledge-base answerer")
    app.text_input(key="create_provider").input("openai")
    app.text_input(key="create_tags").input("support, self-service")
    app.text_area(key="create_references").input(
        '{"system": "demo/support-prompts/triage-system@production"}'
    )
    button(app, "Create agent").click().run()
    assert not app.exception
    assert "Created agent **kb-answerer**" in texts(app)
    assert list(app.dataframe[0].value["Key"]) == ["kb-answerer"]
    assert "Knowledge-base answerer" in [h.value for h in app.subheader]  # opened: its detail below
    with org_client(server, org) as orgdeck:
        agent = orgdeck.agents.get("kb-answerer")
    assert agent.name == "Knowledge-base answerer"
    assert agent.tags == ["self-service", "support"]
    assert agent.provider_config == {"model": "gpt-4o-mini", "temperature": 0.2}
    assert agent.prompt_references == {"system": "demo/support-prompts/triage-system@production"}


def test_create_errors_are_explained_and_nothing_is_created(console, server, org):
    app = console(PAGE)
    labelled(app.text_input, "Stable key").input("Bad Key")
    app.text_input(key="create_provider").input("openai")
    button(app, "Create agent").click().run()
    assert not app.exception
    [said] = [e.value for e in app.error]
    assert said.startswith("Stable key: lowercase letters, digits") and "e.g. support-triage" in said
    assert app.text_input(key="create_stable_key").value == "Bad Key"  # kept to correct
    app.text_input(key="create_stable_key").input("good-key")
    app.text_area(key="create_config").input("{not json")
    button(app, "Create agent").click().run()
    assert [e.value for e in app.error] == [
        "Provider config: not valid JSON: Expecting property name enclosed in double quotes (line 1)"
    ]
    assert app.text_input(key="create_provider").value == "openai"
    with org_client(server, org) as orgdeck:
        assert orgdeck.agents.list().total == 0


def test_edit_the_draft(console, server, org):
    seed(server, org)
    app = console(PAGE)
    select_row(app, "agents_table", 2)  # support-triage
    app.text_area(key="edit_support-triage_config").input('{"model": "gpt-4.1", "temperature": 0.1}')
    app.text_input(key="edit_support-triage_tags").input("support, vip")
    button(app, "Save draft").click().run()
    assert not app.exception
    assert "Saved the draft of **support-triage**" in texts(app)
    assert "v2 + unversioned changes" in texts(app)
    with org_client(server, org) as orgdeck:
        agent = orgdeck.agents.get("support-triage")
        assert agent.provider_config == {"model": "gpt-4.1", "temperature": 0.1}
        assert agent.tags == ["support", "vip"]
        assert agent.fleet_id is not None
        assert orgdeck.agents.version("support-triage", 2).snapshot.provider_config["model"] == "gpt-4o"


def test_leave_the_fleet_from_the_edit_form(console, server, org):
    seed(server, org)
    app = console(PAGE)
    select_row(app, "agents_table", 1)  # refund-assistant
    app.selectbox(key="edit_refund-assistant_fleet").select_index(0)
    button(app, "Save draft").click().run()
    assert not app.exception
    with org_client(server, org) as orgdeck:
        assert orgdeck.agents.get("refund-assistant").fleet_id is None


def test_snapshot_a_version(console, server, org):
    seed(server, org)
    app = console(PAGE)
    select_row(app, "agents_table", 0)  # code-reviewer
    assert "No versions yet" in texts(app)
    app.button(key="snapshot").click().run()
    assert not app.exception
    assert "Snapshotted **code-reviewer** as version 1" in texts(app)
    assert app.button(key="snapshot").disabled  # the draft now equals version 1
    assert list(app.dataframe[1].value["Version"]) == [1]
    with org_client(server, org) as orgdeck:
        assert orgdeck.agents.versions("code-reviewer").total == 1


def test_versions_table_and_diff(console, server, org):
    seed(server, org)
    app = console(PAGE)
    select_row(app, "agents_table", 2)  # support-triage
    versions = app.dataframe[1].value
    assert list(versions["Version"]) == [2, 1]
    assert list(versions["Model"]) == ["gpt-4o", "gpt-4o-mini"]
    assert "1 line(s) removed, 1 added" in texts(app)
    diff = app.html[0].proto.body
    assert "Version 1" in diff and "Version 2" in diff
    assert "gpt-4o-mini" in diff and "&quot;gpt-4o&quot;" in diff
    app.selectbox(key="from_support-triage").select(2).run()
    assert "Version 2 and Version 2 are identical" in texts(app)


def test_archive_asks_first(console, server, org):
    seed(server, org)
    app = console(PAGE)
    select_row(app, "agents_table", 0)  # code-reviewer
    app.button(key="archive_code-reviewer_start").click().run()
    assert "cannot be undone" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.agents.get("code-reviewer").archived_at is None
    app.button(key="archive_code-reviewer_confirm").click().run()
    assert not app.exception
    assert "Archived **code-reviewer**" in texts(app)
    assert "code-reviewer" not in list(app.dataframe[0].value["Key"])
