"""The whole story in the trail: change-request events link to the request and can be filtered,
and what an approved request made names who asked and who approved, with a link to the request."""

from __future__ import annotations

import pytest

from api import OrgdeckClient
from tests.console.conftest import select_row, texts
from tests.test_deployments import versioned_agent


@pytest.fixture
def approved(server, org) -> str:
    """A deployment to a protected environment, requested by ana and approved by bo."""
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "alpha")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
        keys = {
            name: admin.api_keys.create(
                f"{name}-key", member_id=admin.members.create(f"{name}@example.com", name, "operator").id
            ).key
            for name in ("ana", "bo")
        }
    with OrgdeckClient(server.url, keys["ana"], org_slug=org.slug) as ana:
        opened = ana.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["alpha"]}, "Release"
        )
    with OrgdeckClient(server.url, keys["bo"], org_slug=org.slug) as bo:
        bo.change_requests.approve(opened.id)
    with OrgdeckClient(server.url, keys["ana"], org_slug=org.slug) as ana:  # a newer decided one
        withdrawn = ana.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["alpha"]}, "Withdrawn"
        )
        ana.change_requests.cancel(withdrawn.id)
    return opened.id


def test_activity_filters_change_requests_and_links_each_to_its_request(console, approved):
    app = console("pages/activity.py")
    assert "change_request" in app.selectbox(key="activity_target_type").options
    app.selectbox(key="activity_target_type").select("change_request").run()
    table = app.dataframe[0].value
    assert list(table["Action"]) == [
        "cancelChangeRequest",
        "openChangeRequest",
        "approveChangeRequest",
        "openChangeRequest",
    ]
    assert all(cell.startswith("change request ") for cell in table["Target"])
    select_row(app, "activity_table", 2)
    link = next(e for e in app.get("page_link") if e.proto.label.startswith("Open change request"))
    assert link.proto.page.endswith("changes") and f"open={approved}" in link.proto.query_string


def test_the_deployment_in_activity_names_requester_and_approver(console, approved):
    app = console("pages/activity.py")
    table = app.dataframe[0].value
    row = list(table["Approved by"]).index("bo@example.com")
    assert table["Actor"][row] == "ana@example.com"  # on record as the requester's own deploy
    select_row(app, "activity_table", row)
    assert (
        f"Applied by change request `{approved}`: asked by ana@example.com, approved by bo@example.com"
        in texts(app)
    )


def test_a_link_to_a_decided_request_opens_it_in_the_history(console, approved):
    app = console("pages/changes.py")
    app.query_params["open"] = approved
    app.run()
    assert not app.exception, app.exception
    assert "**Deployment · environment production**, applied: Release" in texts(app)
    assert "Approved by bo@example.com" in texts(app)
