"""The Changes page: open requests with their preview, approved or rejected with a comment by
another member; decided ones in the history."""

from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import texts
from tests.test_deployments import versioned_agent

PAGE = "pages/changes.py"


def member_key(admin: OrgdeckClient, name: str, role: str) -> str:
    member = admin.members.create(f"{name}@example.com", name.title(), role)
    return admin.api_keys.create(f"{name}-key", member_id=member.id).key


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def test_a_member_approves_a_request_with_a_comment_and_it_moves_to_history(
    console, server, org, monkeypatch
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
        ana, bo = member_key(admin, "ana", "operator"), member_key(admin, "bo", "operator")
    with OrgdeckClient(server.url, ana, org_slug=org.slug) as requester:
        opened = requester.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["triage"]}, "First release"
        )
    monkeypatch.setenv("ORGDECK_API_KEY", ana)
    own = console(PAGE)
    assert "You opened this request" in texts(own)
    assert button(own, "Approve").disabled

    monkeypatch.setenv("ORGDECK_API_KEY", bo)
    app = console(PAGE)
    assert "Asked by **ana@example.com**" in texts(app)
    preview = app.dataframe[0].value
    assert list(preview["Agent"].unique()) == ["triage"] and "not deployed → v1" in set(preview["Version"])
    app.text_area(key=f"comment_{opened.id}").input("Looks right")
    button(app, "Approve").click().run()
    assert not app.exception
    assert "Approved and applied **environment production**" in texts(app)
    assert "No change waits for review." in texts(app)
    history = app.dataframe[0].value
    assert list(history["Status"]) == ["applied"] and list(history["Reviewed by"]) == ["bo@example.com"]
    assert history["Result"][0].startswith("job job_")
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        decided = admin.change_requests.get(opened.id)
    assert decided.approvals[0].comment == "Looks right"


def test_a_rejection_shows_in_the_history(console, server, org, monkeypatch):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        admin.registries.create("prompts")
        ref = f"{org.slug}/prompts"
        admin.registries.publish(ref, "greeting", "Hello", labels=["production"])
        admin.registries.publish(ref, "greeting", "Hi")
        admin.registries.update(ref, protected_labels=["production"])
        dee, eve = member_key(admin, "dee", "author"), member_key(admin, "eve", "author")
    with OrgdeckClient(server.url, dee, org_slug=org.slug) as requester:
        opened = requester.change_requests.open(
            "label",
            {"registryRef": ref, "name": "greeting", "label": "production", "version": "2"},
            "Shorter",
        )
    monkeypatch.setenv("ORGDECK_API_KEY", eve)
    app = console(PAGE)
    assert any("-Hello" in code.value and "+Hi" in code.value for code in app.code)
    app.text_area(key=f"comment_{opened.id}").input("Too curt")
    button(app, "Reject").click().run()
    assert not app.exception
    assert "Rejected the change" in texts(app)
    history = app.dataframe[0].value
    assert list(history["Status"]) == ["rejected"] and list(history["Kind"]) == ["Label move"]
