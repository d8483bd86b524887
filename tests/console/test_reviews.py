"""Reviews find their reviewer: Overview lists the requests the signed-in member may approve, the
Changes menu item counts them, the environment shows what waits, and a person's own request (from
any of their keys) cannot be reviewed by them, the tooltip says why."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from tests.console.conftest import texts
from tests.test_deployments import versioned_agent


def member_key(admin: OrgdeckClient, name: str, role: str) -> tuple[str, str]:
    member = admin.members.create(f"{name}@example.com", name.title(), role)
    return member.id, admin.api_keys.create(f"{name}-key", member_id=member.id).key


def button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def menu_titles(app: AppTest) -> list[str]:
    return [link.proto.label for link in app.sidebar.get("page_link")]


@pytest.fixture
def requested(server, org) -> dict[str, str]:
    """A protected production, a deployment to it requested by operator ana; bo, another operator,
    and cleo, an author, who may not review a deployment."""
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True, required_approvals=2)
        ana_id, ana = member_key(admin, "ana", "operator")
        ana_laptop = admin.api_keys.create("ana-laptop", member_id=ana_id).key
        keys = {"ana": ana, "ana-laptop": ana_laptop}
        keys["bo"] = member_key(admin, "bo", "operator")[1]
        keys["cleo"] = member_key(admin, "cleo", "author")[1]
    with OrgdeckClient(server.url, ana, org_slug=org.slug) as requester:
        requester.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["triage"]}, "First release"
        )
    return keys


def test_overview_and_the_menu_tell_a_reviewer_what_waits(console, requested, monkeypatch):
    keys = requested
    monkeypatch.setenv("ORGDECK_API_KEY", keys["bo"])
    app = console()
    shown = texts(app)
    assert "**Deployment · environment production** waits for your review:" in shown
    assert "asked by ana@example.com" in shown and "(First release)" in shown
    assert "Changes (1)" in menu_titles(app)

    monkeypatch.setenv("ORGDECK_API_KEY", keys["cleo"])  # an author reviews no deployment
    app = console()
    assert "waits for your review:" not in texts(app)
    assert "Changes" in menu_titles(app) and "Changes (1)" not in menu_titles(app)


def test_a_request_is_ones_own_from_any_of_ones_keys(console, requested, monkeypatch):
    keys = requested
    monkeypatch.setenv("ORGDECK_API_KEY", keys["ana-laptop"])
    assert "waits for your review:" not in texts(console())
    app = console("pages/changes.py")
    approve, reject = button(app, "Approve"), button(app, "Reject")
    assert approve.disabled and reject.disabled
    assert approve.help == "You opened this request (with any of your keys): another member reviews it."


def test_an_approver_is_told_they_approved_already(console, requested, monkeypatch):
    keys = requested
    monkeypatch.setenv("ORGDECK_API_KEY", keys["bo"])
    app = console("pages/changes.py")
    assert not button(app, "Approve").disabled
    button(app, "Approve").click().run()
    assert not app.exception, app.exception
    assert "Approved (1 of 2 approval(s))." in texts(app)
    approve = button(app, "Approve")
    assert approve.disabled and approve.help == "You approved it already: it waits for other members."
    overview = console()
    assert "Changes" in menu_titles(overview) and "Changes (1)" not in menu_titles(overview)


def test_the_environment_says_a_change_waits(console, requested):
    app = console("pages/environments.py")
    assert "**Deployment waiting for review:** First release" in texts(app)


def test_a_protected_deployment_needs_a_reason_and_the_button_says_so(console, requested):
    app = console("pages/deployments.py")
    app.session_state["tab"] = "Deploy"
    app.run()
    app.multiselect(key="deploy_agents").set_value(["triage"]).run()
    button(app, "Preview changes").click().run()
    assert not app.exception, app.exception
    request = button(app, "Request deployment to production")
    assert request.disabled and request.help == "Type a reason first: the reviewers read it."
    app.text_input(key="deploy_reason").input("Second release").run()
    assert not button(app, "Request deployment to production").disabled


def test_a_label_with_a_move_waiting_says_so(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        registry = admin.registries.create("support-prompts")
        admin.registries.publish(registry.registry_ref, "triage", "One", labels=["production"])
        admin.registries.publish(registry.registry_ref, "triage", "Two")
        admin.registries.update(registry.registry_ref, protected_labels=["production"])
        moved = {
            "registryRef": registry.registry_ref,
            "name": "triage",
            "label": "production",
            "version": "2",
        }
        opened = admin.change_requests.open("label", moved, "Two is better")
    app = console("pages/registries.py")
    assert f"Moving `production` to 2 waits for review ({opened.id}, asked by key admin)." in texts(app)
