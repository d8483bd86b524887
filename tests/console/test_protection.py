"""Protection set in the console: an environment's protection and approvals, a registry's protected
labels and the organization's settings of reviewed changes, by an admin, and shown wherever an
environment is listed."""

from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import texts


def admin_of(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def test_an_admin_protects_an_environment_and_every_listing_says_so(console, server, org):
    with admin_of(server, org) as admin:
        production = admin.environments.create("production")
    app = console("pages/environments.py")
    assert list(app.dataframe[0].value["Protection"]) == [""]
    app.toggle(key=f"edit_protected_{production.id}").set_value(True)
    app.number_input(key=f"edit_required_approvals_{production.id}").set_value(2)
    button(app, "Save protection").click().run()
    assert not app.exception, app.exception
    assert "**production** is protected · 2 approvals." in texts(app)
    assert list(app.dataframe[0].value["Protection"]) == ["protected · 2 approvals"]
    assert "protected · 2 approvals" in texts(app)  # the detail's badge
    with admin_of(server, org) as admin:
        saved = admin.environments.get(production.id)
    assert (saved.protected, saved.required_approvals) == (True, 2)

    app.toggle(key=f"edit_protected_{production.id}").set_value(False)
    button(app, "Save protection").click().run()
    assert "not protected" in texts(app)
    assert list(app.dataframe[0].value["Protection"]) == [""]


def test_the_deploy_tab_shows_protection_before_anyone_starts(console, server, org):
    with admin_of(server, org) as admin:
        admin.environments.create("production")
        admin.environments.update(admin.environments.list().items[0].id, protected=True, required_approvals=2)
        agent = admin.agents.create("triage", "openai", provider_config={"model": "m"})
        admin.agents.snapshot(agent.stable_key)
    app = console("pages/deployments.py")
    app.session_state["tab"] = "Deploy"
    app.run()
    picker = app.selectbox(key="deploy_environment")
    assert picker.options == ["production · protected · 2 approvals"]
    assert "protected · 2 approvals: deploying here opens a change request" in texts(app)


def test_an_admin_protects_a_registry_label(console, server, org):
    with admin_of(server, org) as admin:
        registry = admin.registries.create("support-prompts")
        admin.registries.publish(registry.registry_ref, "system", "You are helpful.", labels=["production"])
    app = console("pages/registries.py")
    app.multiselect(key=f"protected_labels_{registry.registry_ref}").set_value(["production"])
    button(app, "Save protected labels").click().run()
    assert not app.exception, app.exception
    assert "Protected labels of **" in texts(app)
    assert list(app.dataframe[0].value["Protected labels"]) == ["production"]
    with admin_of(server, org) as admin:
        [saved] = admin.registries.list().items
    assert saved.protected_labels == ["production"]


def test_an_admin_sets_policy_approval_and_request_expiry(console, server, org):
    app = console("pages/members.py")
    app.toggle(key="settings_policy_approval").set_value(True)
    app.number_input(key="settings_request_ttl_days").set_value(3)
    button(app, "Save settings").click().run()
    assert not app.exception, app.exception
    assert "Saved the settings of reviewed changes." in texts(app)
    assert "policies need approval, requests expire after 3 days" in " ".join(e.label for e in app.expander)
    with admin_of(server, org) as admin:
        saved = admin.settings.get()
    assert (saved.policy_approval_required, saved.change_request_ttl_days) == (True, 3)
