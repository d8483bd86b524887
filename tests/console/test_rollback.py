"""One-click rollback from History: any earlier deployment is deployed again, directly, or as a
change request where the environment is protected."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from tests.console.conftest import select_row, texts
from tests.test_deployments import versioned_agent, wait_for_end

PAGE = "pages/deployments.py"


def button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def deployed_twice(server, org, *, protected: bool) -> str:
    """triage v1 then v2 in staging; staging's id."""
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        staging = admin.environments.create("staging")
        wait_for_end(admin, admin.deployments.deploy(staging.id, ["triage"]).id)
        admin.agents.update("triage", provider_config={"model": "gpt-4o"})
        admin.agents.snapshot("triage")
        wait_for_end(admin, admin.deployments.deploy(staging.id, ["triage"]).id)
        if protected:
            admin.environments.update(staging.id, protected=True)
    return staging.id


def history(console) -> AppTest:
    app = console(PAGE)
    app.session_state["tab"] = "History"
    app.run()
    assert not app.exception, app.exception
    return app


def test_one_click_puts_an_earlier_version_back(console, server, org):
    staging = deployed_twice(server, org, protected=False)
    app = history(console)
    assert list(app.dataframe[0].value["Version"]) == ["v2", "v1"]
    select_row(app, "history_table", 1)
    button(app, "Roll back triage in staging to v1").click().run()
    assert not app.exception, app.exception
    assert "Rolling back **triage in staging to v1**" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        newest = admin.deployments.jobs(environment_id=staging).items[0]
        assert [(a.stable_key, a.version) for a in wait_for_end(admin, newest.id).agents] == [("triage", 1)]


def test_a_protected_environment_rolls_back_by_request(console, server, org):
    reason = "v2 answers in the wrong language"
    staging = deployed_twice(server, org, protected=True)
    app = history(console)
    select_row(app, "history_table", 1)
    assert not [b for b in app.button if b.label.startswith("Roll back")]
    requested = button(app, "Request rollback of triage in staging to v1")
    assert requested.disabled and requested.help == "Type a reason first: the reviewers read it."
    [field] = [t for t in app.text_input if t.key.startswith("rollback_reason_")]
    field.input(reason).run()
    button(app, "Request rollback of triage in staging to v1").click().run()
    assert not app.exception, app.exception
    assert "Requested rolling back **triage in staging to v1**" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        [opened] = admin.change_requests.list(status="open").items
        assert len(admin.deployments.jobs(environment_id=staging).items) == 2  # nothing ran yet
    assert opened.reason == reason and opened.payload["agentVersions"] == {"triage": 1}
