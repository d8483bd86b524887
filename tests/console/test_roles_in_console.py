"""Each role sees every write control it may not use disabled, with a tooltip naming the role it
needs, and every one it may use enabled: signed in with a personal key of a member of each role,
on every page of the console, against the live service's own least roles."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from api.members import ROLES, role_at_least
from tests.conftest import Org
from tests.console.conftest import APP, select_row

# Each page's write controls, by label (a confirmation's first button ends with "…"), and the
# operation each calls. A control missing from a page fails the test, as does an unlisted one
# that carries a role's tooltip.
CONTROLS: dict[str, dict[str, str]] = {
    "pages/members.py": {
        "Add member": "createMember",
        "Change role": "updateMember",
        "Deactivate member…": "deactivateMember",
        "Save settings": "updateSettings",
    },
    "pages/api_keys.py": {"Create key": "createApiKey", "Revoke key…": "revokeApiKey"},
    "pages/environments.py": {
        "Create environment": "createEnvironment",
        "Save changes": "updateEnvironment",
        "Save protection": "updateEnvironment",
        "Save rollouts and promotion": "updateEnvironment",
        "Delete environment…": "deleteEnvironment",
        "Save secret": "setSecret",
        "Create signing key": "createSigningKey",
    },
    "pages/tools.py": {
        "Register tool": "createTool",
        "Save changes": "updateTool",
        "Delete tool…": "deleteTool",
    },
    "pages/fleets.py": {
        "Create fleet": "createFleet",
        "Save fleet": "updateFleet",
        "Delete fleet…": "deleteFleet",
    },
    "pages/agents.py": {
        "Create agent": "createAgent",
        "Save draft": "updateAgent",
        "Archive agent…": "archiveAgent",
    },
    "pages/registries.py": {
        "Create registry": "createRegistry",
        "Publish": "publishArtifact",
        "Move label": "moveLabel",
        "Run": "tryPrompt",
        "Save protected labels": "updateRegistry",
        "Delete registry…": "deleteRegistry",
    },
    "pages/governance.py": {
        "Generate draft": "generatePolicyPrompt",
        "Save as new version": "updatePolicy",
        "Delete policy…": "deletePolicy",
    },
    "pages/providers.py": {
        "Add provider": "createProvider",
        "Test connection": "testProvider",
        "Save key": "updateProvider",
        "Delete provider…": "deleteProvider",
    },
    "pages/notifications.py": {
        "Create channel": "createChannel",
        "Send test": "testChannel",
        "Rename": "updateChannel",
        "Disable": "updateChannel",
        "Delete channel…": "deleteChannel",
        "Rotate signing secret…": "rotateSecret",
    },
    "pages/deployments.py": {"Save": "updateDeploymentSettings"},
}
# Controls that ask more than their operation's least role: revoking a service key, and changing
# an environment's protection rules or its rollout and promotion settings, need an admin.
ADMIN_ONLY = {"Revoke key…", "Save protection", "Save rollouts and promotion"}
NEEDS = re.compile(r"^Needs the (\w+) role; you are an? (\w+)\.$")


@pytest.fixture
def furnished(server, org: Org) -> Org:
    """An organization with one of everything the pages open, so every control is drawn."""
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        hook = admin.environments.create("edge", target="webhook", webhook_url="http://127.0.0.1:9/deploy")
        admin.environments.secrets.set("API_TOKEN", "s3cr3t", environment_id=hook.id)
        admin.tools.create("Search tickets", "search-tickets")
        admin.fleets.create("Support", environment_ids=[hook.id])
        admin.agents.create("triage", "openai", provider_config={"model": "m"})
        registry = admin.registries.create("support-prompts")
        admin.registries.publish(registry.registry_ref, "system", "You are helpful.", labels=["production"])
        admin.policies.create("No PII", "Never log personal data.")
        admin.providers.create("Team OpenAI", "openai", api_key="sk-test", models=["gpt-4o-mini"])
        admin.notifications.create_channel("alerts", "webhook", url="http://127.0.0.1:9/hook")
    return org


def signed_in_as(server, org: Org, role: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        member = admin.members.create(f"{role}@example.com", f"{role.title()} Person", role)
        key = admin.api_keys.create(f"{role}-laptop", member_id=member.id).key
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.setenv("ORGDECK_API_KEY", key)


def open_as(page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    if page != "pages/overview.py":
        app.switch_page(page)
        app.run()
    assert not app.exception, (page, app.exception)
    return app


@pytest.mark.parametrize("role", ROLES)
def test_write_controls_are_disabled_exactly_below_their_least_role(server, furnished, role, monkeypatch):
    signed_in_as(server, furnished, role, monkeypatch)
    with OrgdeckClient(server.url) as anonymous:
        least = {op: anonymous.least_role(op) for ops in CONTROLS.values() for op in ops.values()}
    for page, controls in CONTROLS.items():
        app = open_as(page)
        if page == "pages/api_keys.py":  # the organization's admin service key, not one's own
            select_row(app, "api_keys_table", list(app.dataframe[0].value["Name"]).index("admin"))
        buttons = {b.label: b for b in app.button}
        for label, operation in controls.items():
            assert label in buttons, (role, page, label, sorted(buttons))
            button = buttons[label]
            needed = least[operation]
            if label in ADMIN_ONLY:
                needed = "admin"
            if role_at_least(role, needed):
                assert not (button.help or "").startswith("Needs the"), (role, page, label, button.help)
            else:
                assert button.disabled, (role, page, label)
                assert (
                    button.help
                    == f"Needs the {needed} role; you are {'an' if role[0] in 'aeiou' else 'a'} {role}."
                )
        for button in app.button:  # no tooltip names a role the caller holds
            found = NEEDS.match(button.help or "")
            if found:
                assert button.disabled and not role_at_least(role, found[1]) and found[2] == role, (
                    button.label
                )


def test_the_sidebar_says_who_is_signed_in_and_the_role(server, org, monkeypatch):
    signed_in_as(server, org, "operator", monkeypatch)
    app = open_as("pages/overview.py")
    sidebar = " ".join(m.value for m in app.sidebar.markdown)
    assert "Operator Person (operator@example.com)" in sidebar and "Role: **operator**" in sidebar
    monkeypatch.setenv("ORGDECK_API_KEY", org.key)
    service = open_as("pages/overview.py")
    assert "service key admin" in " ".join(m.value for m in service.sidebar.markdown)
