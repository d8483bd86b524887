from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import select_row, texts

PAGE = "pages/fleets.py"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def test_empty_state_invites_a_first_fleet(console):
    app = console(PAGE)
    assert "No fleets yet" in texts(app)


def test_lists_fleets_with_agents_and_environments(console, server, org):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production")
        support = orgdeck.fleets.create("Support", environment_ids=[production.id])
        orgdeck.fleets.create("Engineering")
        orgdeck.agents.create("support-triage", "openai", name="Triage", fleet_id=support.id)
        orgdeck.agents.create("refund-assistant", "anthropic", fleet_id=support.id)
    app = console(PAGE)
    fleets = app.dataframe[0].value
    assert list(fleets["Name"]) == ["Engineering", "Support"]
    assert list(fleets["Agents"]) == [0, 2]
    assert [list(names) for names in fleets["Environments"]] == [[], ["production"]]
    assert len(app.get("plotly_chart")) == 1
    select_row(app, "fleets_table", 1)  # Support
    members = app.dataframe[1].value
    assert list(members["Key"]) == ["refund-assistant", "support-triage"]
    assert "`production`" in texts(app)


def test_create_a_fleet_with_environments(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
    app = console(PAGE)
    app.text_input(key="new_fleet_name").input("Support")
    app.multiselect(key="create_fleet_environments").select(staging.id)
    button(app, "Create fleet").click().run()
    assert not app.exception
    assert "Created fleet **Support**" in texts(app)
    with org_client(server, org) as orgdeck:
        (fleet,) = orgdeck.fleets.list().items
    assert fleet.name == "Support"
    assert [e.name for e in fleet.environments] == ["staging"]


def test_create_error_is_explained(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.fleets.create("Support")
    app = console(PAGE)
    app.text_input(key="new_fleet_name").input("Support")
    button(app, "Create fleet").click().run()
    assert not app.exception
    assert [e.value for e in app.error] == ["Name: A fleet named 'Support' already exists"]
    assert app.text_input(key="new_fleet_name").value == "Support"


def test_edit_a_fleet(console, server, org):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production")
        fleet = orgdeck.fleets.create("Support")
    app = console(PAGE)
    app.text_input(key=f"edit_fleet_name_{fleet.id}").input("Customer care")
    app.multiselect(key=f"edit_fleet_environments_{fleet.id}").select(production.id)
    button(app, "Save fleet").click().run()
    assert not app.exception
    assert "Saved fleet **Customer care**" in texts(app)
    with org_client(server, org) as orgdeck:
        saved = orgdeck.fleets.get(fleet.id)
    assert saved.name == "Customer care"
    assert [e.id for e in saved.environments] == [production.id]


def test_delete_asks_first_and_keeps_the_agents(console, server, org):
    with org_client(server, org) as orgdeck:
        fleet = orgdeck.fleets.create("Support")
        orgdeck.agents.create("support-triage", "openai", fleet_id=fleet.id)
    app = console(PAGE)
    app.button(key=f"delete_fleet_{fleet.id}_start").click().run()
    assert "keep existing" in texts(app)
    app.button(key=f"delete_fleet_{fleet.id}_confirm").click().run()
    assert not app.exception
    assert "Deleted fleet **Support**" in texts(app)
    assert "No fleets yet" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.fleets.list().total == 0
        assert orgdeck.agents.get("support-triage").fleet_id is None
