"""The Changes page: open requests with their preview, approved or rejected with a comment by
another member; decided ones in the history."""

from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import label_target, select_row, texts
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
    assert "Result: job job" in texts(app)  # the selected request's detail
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        decided = admin.change_requests.get(opened.id)
    assert decided.approvals[0].comment == "Looks right"


def test_an_approval_that_no_longer_counts_says_why(console, server, org, monkeypatch):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True, required_approvals=2)
        ana, bo, cy = (member_key(admin, name, "operator") for name in ("ana", "bo", "cy"))
    with OrgdeckClient(server.url, ana, org_slug=org.slug) as requester:
        opened = requester.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["triage"]}, "Release"
        )
    with OrgdeckClient(server.url, bo, org_slug=org.slug) as approver:
        approver.change_requests.approve(opened.id, comment="Fine")
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        admin.members.update(next(m.id for m in admin.members.list().items if m.name == "Bo"), role="author")
    monkeypatch.setenv("ORGDECK_API_KEY", cy)
    app = console(PAGE)
    assert "0 of 2 approval(s)" in texts(app)
    assert (
        "Approved by bo@example.com: Fine (not counted: bo@example.com is now author; a deployment "
        "change needs operator)"
    ) in texts(app)


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


def test_environment_changes_show_field_by_field_and_never_a_secrets_value(console, server, org, monkeypatch):
    value = "sk-live-never-on-screen"
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        production = admin.environments.create(
            "production", target="webhook", webhook_url="https://one.example.com/x"
        )
        admin.environments.update(production.id, protected=True)
        ana, bo = member_key(admin, "ana", "operator"), member_key(admin, "bo", "operator")
    with OrgdeckClient(server.url, ana, org_slug=org.slug) as requester:
        moved = {
            "action": "update",
            "environmentId": production.id,
            "webhookUrl": "https://two.example.com/y",
        }
        requester.change_requests.open("environment", moved, "The receiver moved")
        secret = {"action": "setSecret", "name": "API_TOKEN", "value": value, "environmentId": production.id}
        rotation = requester.change_requests.open("environment", secret, "Rotated")
    with OrgdeckClient(server.url, bo, org_slug=org.slug) as reviewer:
        reviewer.change_requests.approve(rotation.id)
    monkeypatch.setenv("ORGDECK_API_KEY", bo)
    app = console(PAGE)
    preview = app.dataframe[0].value
    assert list(preview["Field"]) == ["webhookUrl"]
    # Field by field below the summary: before and after, each whole.
    assert [c.value for c in app.code][:2] == ["https://one.example.com/x", "https://two.example.com/y"]
    history = app.dataframe[1].value
    assert list(history["Kind"]) == ["Environment"] and "Result: applied" in texts(app)
    assert value not in texts(app) + "".join(frame.value.to_string() for frame in app.dataframe)


def test_a_protected_environment_offers_request_deployment_instead_of_deploy(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "alpha")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
    app = console("pages/deployments.py")
    app.session_state["tab"] = "Deploy"
    app.run()
    app.multiselect(key="deploy_agents").select("alpha").run()
    button(app, "Preview changes").click().run()
    assert not app.exception, app.exception
    assert "production is protected" in texts(app)
    assert not any(b.label.startswith("Deploy to") for b in app.button)
    assert button(app, "Request deployment to production").disabled
    app.text_input(key="deploy_reason").input("First release").run()
    button(app, "Request deployment to production").click().run()
    assert not app.exception, app.exception
    assert "Requested the deployment to **production**" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (opened,) = admin.change_requests.list().items
        assert admin.deployments.jobs().items == []
    assert (opened.status, opened.reason, opened.payload["agentVersions"]) == (
        "open",
        "First release",
        {"alpha": 1},
    )


def test_a_protected_label_shows_a_lock_and_requests_its_move(console, server, org):
    ref = f"{org.slug}/prompts"
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        admin.registries.create("prompts")
        admin.registries.publish(ref, "greeting", "Hello", labels=["production"])
        admin.registries.publish(ref, "greeting", "Hi")
        admin.registries.update(ref, protected_labels=["production"])
    app = console("pages/registries.py")
    select_row(app, "registries_table", 0)
    assert "`production` protected" in texts(app)
    app.radio(key="label_to_move").set_value("production")
    label_target(app).select("2")
    app.text_input(key="label_reason").input("Friendlier")
    button(app, "Request move").click().run()
    assert not app.exception, app.exception
    assert "Requested moving **production**" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (opened,) = admin.change_requests.list().items
        assert admin.registries.retrieve(ref, "greeting", label="production").version == "1"
    assert opened.payload["version"] == "2" and opened.kind == "label"


def test_the_policy_editor_submits_for_approval_when_the_organization_requires_it(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        admin.settings.update(policy_approval_required=True)
    app = console("pages/governance.py")
    app.text_area(key="draft_instructions").input("Never log customer PII.")
    button(app, "Generate draft").click().run()
    app.text_input(key="draft_reason").input("Baseline rule")
    button(app, "Submit for approval").click().run()
    assert not app.exception, app.exception
    assert "Submitted new policy" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (opened,) = admin.change_requests.list().items
        assert admin.policies.list().items == []
    assert (opened.kind, opened.reason, opened.preview["action"]) == ("policy", "Baseline rule", "create")


def test_an_unset_field_reads_not_set_never_none(console, server, org, monkeypatch):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
        ana, bo = member_key(admin, "ana", "operator"), member_key(admin, "bo", "operator")
    with OrgdeckClient(server.url, ana, org_slug=org.slug) as requester:
        retarget = {
            "action": "update",
            "environmentId": production.id,
            "target": "webhook",
            "webhookUrl": "https://hook.example.com/deploy",
        }
        requester.change_requests.open("environment", retarget, "Deliver to the partner")
    monkeypatch.setenv("ORGDECK_API_KEY", bo)
    app = console(PAGE)
    assert "None" not in [c.value for c in app.code]
    assert "(not set)" in [c.value for c in app.code]  # the webhook URL before: none
    assert "https://hook.example.com/deploy" in [c.value for c in app.code]
