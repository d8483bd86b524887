"""The Governance page's checks: the editor's examples run as the author edits, deny out of reach
until they pass, the impact on what runs now, the compliance view and exceptions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from components.governance.compliance import OPENED
from tests.console.conftest import texts
from tests.test_deployments import versioned_agent, wait_for_end

PAGE = "pages/governance.py"
NO_GPT35 = "agent.model != 'gpt-3.5-turbo'"
PASSING = {"agent": {"model": "gpt-4o"}}
FAILING = {"agent": {"model": "gpt-3.5-turbo"}}
EXAMPLES = [
    {"name": "modern model", "input": PASSING, "expect": "pass"},
    {"name": "old model", "input": FAILING, "expect": "fail"},
]


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def button(app: AppTest, label: str, key_part: str = ""):
    return next(b for b in app.button if b.label == label and key_part in (b.key or ""))


def ran(app: AppTest) -> AppTest:
    app.run()
    assert not app.exception, app.exception
    return app


def saved_policy(orgdeck: OrgdeckClient, **fields):
    return orgdeck.policies.create(
        "No gpt-3.5",
        "1. MUST NOT use gpt-3.5.",
        severity="warning",
        check=NO_GPT35,
        message="gpt-3.5 is retired",
        examples=EXAMPLES,
        **fields,
    )


def running_gpt35(orgdeck: OrgdeckClient, environment: str = "staging") -> str:
    staging = orgdeck.environments.create(environment)
    versioned_agent(orgdeck, "old-bot", model="gpt-3.5-turbo")
    wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["old-bot"]).id)
    return staging.id


def open_policy(console, server, org) -> tuple[AppTest, str]:
    """The page with the only policy open; the prefix of its editor's keys."""
    with org_client(server, org) as orgdeck:
        [policy] = orgdeck.policies.list().items
    return console(PAGE), f"policy_{policy.id}_{policy.version}"


def edit_examples(app: AppTest, key: str, rows: list[dict]) -> AppTest:
    """Give the examples table these rows, as the author's edits to it do."""
    typed = [{"Name": r["name"], "Input": json.dumps(r["input"]), "Expect": r["expect"]} for r in rows]
    return type_examples(app, key, typed)


def type_examples(app: AppTest, key: str, rows: list[dict[str, str]]) -> AppTest:
    app.session_state[f"{key}_examples_base"] = pd.DataFrame(rows, columns=["Name", "Input", "Expect"])
    return ran(app)


def test_compliance_says_there_is_no_check_yet(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.policies.create("Plain words", "1. MUST be polite.")
    app = console(PAGE)
    assert "No policy with a check yet" in texts(app)
    assert not app.get("plotly_chart")


def test_compliance_heatmap_and_drill_down_to_the_violating_agents(console, server, org):
    with org_client(server, org) as orgdeck:
        running_gpt35(orgdeck)
        orgdeck.environments.create("production")
        policy = saved_policy(orgdeck)
    app = console(PAGE)
    [chart] = app.get("plotly_chart")
    figure = json.loads(chart.proto.spec)
    idle, compliant, violating = figure["data"]
    assert violating["y"] == ["No gpt-3.5"] and set(violating["x"]) == {"staging", "production"}
    cells = dict(zip(violating["x"], violating["z"][0], strict=True))
    assert cells["staging"] == 1 and cells["production"] is None
    # Nothing runs in production: grey, neither compliant nor violating.
    assert dict(zip(idle["x"], idle["z"][0], strict=True)) == {"staging": None, "production": 1}
    assert compliant["z"] == [[None, None]]
    assert "Every violation" in texts(app)
    app.session_state[OPENED] = (policy.id, "staging")
    ran(app)
    assert "Violating agents of **No gpt-3.5** in **staging**" in texts(app)
    table = app.dataframe[0].value
    assert list(zip(table["Agent"], table["Enforcement"], table["Message"], strict=True)) == [
        ("old-bot", "warn", "gpt-3.5 is retired")
    ]
    app.session_state[OPENED] = (policy.id, "production")
    ran(app)
    assert "Every agent there complies with this policy." in texts(app)


def test_examples_run_as_the_author_edits_and_deny_waits_for_them(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.policies.create("No gpt-3.5", "1. MUST NOT use gpt-3.5.", severity="warning")
    app, key = open_policy(console, server, org)
    deny = button(app, "deny", key)
    assert deny.disabled and "needs a check" in deny.help

    app.text_area(key=f"{key}_check").input(NO_GPT35)
    edit_examples(app, key, [EXAMPLES[0], {**EXAMPLES[1], "expect": "pass"}])
    said = texts(app)
    assert "**modern model** expected pass, got pass" in said
    assert "**old model** expected pass, got fail" in said
    deny = button(app, "deny", key)
    assert deny.disabled and "these do not: old model" in deny.help

    edit_examples(app, key, EXAMPLES)
    assert "Every example gives its expected outcome." in texts(app)
    assert not button(app, "deny", key).disabled
    button(app, "deny", key).click()
    ran(app)
    assert app.session_state[f"{key}_enforcement"] == "deny"
    button(app, "Save as new version").click()
    ran(app)
    with org_client(server, org) as orgdeck:
        [saved] = orgdeck.policies.list().items
    assert (saved.check, saved.enforcement, saved.version) == (NO_GPT35, "deny", 2)
    assert [e.name for e in saved.examples] == ["modern model", "old model"]


def test_a_check_that_does_not_compile_is_said_next_to_it(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.policies.create("Broken", "1. MUST work.", severity="warning")
    app, key = open_policy(console, server, org)
    app.text_area(key=f"{key}_check").input("agent.model ==")
    ran(app)
    assert any("Check" in e.value for e in app.error), texts(app)
    assert button(app, "deny", key).disabled


def test_an_example_whose_input_is_not_json_is_named(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.policies.create("Some rule", "1. MUST work.")
    app, key = open_policy(console, server, org)
    app.text_area(key=f"{key}_check").input(NO_GPT35)
    type_examples(app, key, [{"Name": "half typed", "Input": '{"agent": ', "Expect": "pass"}])
    assert any("half typed: the input is not valid JSON" in e.value for e in app.error)
    assert button(app, "Save as new version").disabled


def test_impact_on_what_runs_now_before_deny(console, server, org):
    with org_client(server, org) as orgdeck:
        running_gpt35(orgdeck)
        saved_policy(orgdeck)
    app, key = open_policy(console, server, org)
    said = texts(app)
    assert "**Impact on what runs now** · Breaking it today: 1 agent-environment pair(s)" in said
    button(app, "deny", key).click()
    ran(app)
    assert "Deny would refuse new deployments of 1 agent-environment pair(s)" in texts(app)
    impact = next(d.value for d in app.dataframe if "Environment" in d.value and "Message" in d.value)
    assert list(impact["Agent"]) == ["old-bot"]


def test_scope_controls_save_what_was_chosen(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("production")
        saved_policy(orgdeck)
    app, key = open_policy(console, server, org)
    app.radio(key=f"{key}_env_match").set_value("names")
    ran(app)
    app.multiselect(key=f"{key}_env_names").select("production")
    app.radio(key=f"{key}_agent_match").set_value("tags")
    ran(app)
    app.multiselect(key=f"{key}_agent_tags").select("customer-facing")
    ran(app)
    button(app, "Save as new version").click()
    ran(app)
    with org_client(server, org) as orgdeck:
        [saved] = orgdeck.policies.list().items
    assert saved.scope.environments.match == "names" and saved.scope.environments.names == ["production"]
    assert saved.scope.agents.match == "tags" and saved.scope.agents.tags == ["customer-facing"]


def test_exceptions_granted_listed_and_revoked(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("staging")
        saved_policy(orgdeck, enforcement="deny")
    app = console(PAGE)
    assert "No exceptions yet." in texts(app)
    app.selectbox(key="exception_environment").select("staging")
    app.text_area(key="exception_reason").input("Migration to gpt-4o under way")
    button(app, "Grant exception").click()
    ran(app)
    assert "Granted an exception to **No gpt-3.5**" in texts(app), texts(app)
    with org_client(server, org) as orgdeck:
        [granted] = orgdeck.policies.exceptions().items
    assert (granted.environment_name, granted.live) == ("staging", True)
    assert granted.expires_at > datetime.now(UTC) + timedelta(days=6)

    app.session_state["exceptions_table"] = {"selection": {"rows": [0], "columns": []}}
    ran(app)
    button(app, "Revoke exception").click()
    ran(app)
    assert "Revoked the exception to **No gpt-3.5**." in texts(app)
    with org_client(server, org) as orgdeck:
        [revoked] = orgdeck.policies.exceptions().items
    assert not revoked.live


def test_where_policies_need_approval_the_exception_form_submits_a_change_request(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("staging")
        policy = saved_policy(orgdeck, enforcement="deny")
        orgdeck.settings.update(policy_approval_required=True)
    app = console(PAGE)
    assert not [b for b in app.button if b.label == "Grant exception"]
    app.selectbox(key="exception_environment").select("staging")
    app.text_area(key="exception_reason").input("Migration to gpt-4o under way")
    button(app, "Submit exception for approval").click()
    ran(app)
    assert "Submitted an exception to **No gpt-3.5** for approval" in texts(app), texts(app)
    assert not app.error, [e.value for e in app.error]
    with org_client(server, org) as orgdeck:
        assert orgdeck.policies.exceptions().items == []
        (opened,) = orgdeck.change_requests.list().items
    assert (opened.kind, opened.reason, opened.preview["action"]) == (
        "policy",
        "Migration to gpt-4o under way",
        "exception",
    )
    assert opened.payload["policyId"] == policy.id
    assert (opened.payload["environmentName"], opened.payload["exception"]) == ("staging", True)


def preview_old_bot(console) -> AppTest:
    app = console("pages/deployments.py")
    app.session_state["tab"] = "Deploy"
    ran(app)
    app.multiselect(key="deploy_agents").select("old-bot")
    ran(app)
    button(app, "Preview changes").click()
    return ran(app)


def test_the_preview_lists_violations_and_a_deny_disables_deploy(console, server, org):
    with org_client(server, org) as orgdeck:
        running_gpt35(orgdeck)
        saved_policy(orgdeck)
        orgdeck.policies.create(
            "Audited", "1. MUST be watched.", check=NO_GPT35, message="watched", enforcement="audit"
        )
    app = preview_old_bot(console)
    said = texts(app)
    assert "**Policy violations** · 2 (0 refusing the deployment)" in said
    table = next(d.value for d in app.dataframe if "Policy" in d.value)
    assert sorted(zip(table["Policy"], table["Enforcement"], strict=True)) == [
        ("Audited", "audit"),
        ("No gpt-3.5", "warn"),
    ]
    assert not button(app, "Deploy to staging").disabled

    with org_client(server, org) as orgdeck:
        [policy] = [p for p in orgdeck.policies.list().items if p.name == "No gpt-3.5"]
        orgdeck.policies.update(policy.id, enforcement="deny")
    app = preview_old_bot(console)
    assert "**Policy violations** · 2 (1 refusing the deployment)" in texts(app)
    deploy = button(app, "Deploy to staging")
    assert deploy.disabled and "A deny policy refuses this deployment" in deploy.help


def test_a_deny_met_on_deploy_is_said_in_words(console, server, org):
    with org_client(server, org) as orgdeck:
        running_gpt35(orgdeck)
    app = preview_old_bot(console)
    assert not button(app, "Deploy to staging").disabled
    with org_client(server, org) as orgdeck:  # saved between the preview and the click
        saved_policy(orgdeck, enforcement="deny")
    button(app, "Deploy to staging").click()
    ran(app)
    [refusal] = [e.value for e in app.error]
    assert "a deny policy refuses it" in refusal
    assert "No gpt-3.5" in refusal and "old-bot" in refusal and "gpt-3.5 is retired" in refusal


def test_the_overview_counts_deny_and_warn_violations(console, server, org):
    with org_client(server, org) as orgdeck:
        running_gpt35(orgdeck)
        saved_policy(orgdeck)
        orgdeck.policies.create(
            "Audited", "1. MUST be watched.", check=NO_GPT35, message="watched", enforcement="audit"
        )
    app = console()
    tile = next(metric for metric in app.metric if metric.label == "Policy violations")
    assert tile.value == "1"
    assert "(0 deny, 1 warn)" in tile.help


def test_a_draft_fills_the_check_message_and_examples(console, server, org):
    app = console(PAGE)
    app.text_area(key="draft_instructions").input("Production agents must not use gpt-3.5-turbo.")
    button(app, "Generate draft").click()
    ran(app)
    check = app.text_area(key="draft_check").value
    assert "gpt-3.5-turbo" in check
    assert app.text_input(key="draft_message").value
    examples = app.session_state["draft_examples_base"]
    assert set(examples["Expect"]) == {"pass", "fail"}
    assert app.radio(key="draft_env_match").value == "names"
    assert "Every example gives its expected outcome." in texts(app)
    assert not button(app, "deny", "draft").disabled
    button(app, "deny", "draft").click()
    ran(app)
    button(app, "Save as policy").click()
    ran(app)
    with org_client(server, org) as orgdeck:
        [saved] = orgdeck.policies.list().items
    assert (saved.check, saved.enforcement) == (check, "deny")
    assert saved.scope.environments.names == ["production"]
    assert len(saved.examples) == len(examples)


def test_compliance_with_nothing_in_violation_says_so(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        versioned_agent(orgdeck, "new-bot", model="gpt-4o")
        wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["new-bot"]).id)
        saved_policy(orgdeck)
    app = console(PAGE)
    assert "No violations: everything that runs complies" in texts(app)
    assert "Every violation" not in texts(app)
