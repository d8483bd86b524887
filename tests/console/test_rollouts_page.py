"""Rollouts in the console: a job's waves with Pause, Resume and Abort (Jobs tab and the Deploy
tab's followed job), the strategy passed through from Deploy, the role tooltips, and the
Environments page's rollout and promotion settings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from api.deployments import DeploymentJob
from tests.conftest import wait_for
from tests.console.conftest import texts
from tests.console.test_deployments_page import PAGE, button, open_tab, org_client
from tests.console.test_roles_in_console import open_as, signed_in_as
from tests.test_deployments import versioned_agent, wait_for_end

ENVIRONMENTS = "pages/environments.py"
# Long enough that the job waits between waves for as long as a test takes.
SLOW = {"waveSize": 1, "pauseSeconds": 600}
AGENTS = ("alpha", "beta", "gamma", "delta", "epsilon")


def wait_for_job(
    orgdeck: OrgdeckClient, job_id: str, check: Callable[[DeploymentJob], bool], what: str
) -> DeploymentJob:
    return wait_for(lambda: (job := orgdeck.deployments.job(job_id)) and check(job) and job, 30, what)


def waiting_rollout(orgdeck: OrgdeckClient, agents: int = 3) -> str:
    """A job in waves of one whose first wave is done and which now waits for the next."""
    environment = orgdeck.environments.create("staging")
    keys = [f"agent-{index}" for index in range(agents)]
    for key in keys:
        versioned_agent(orgdeck, key)
    job = orgdeck.deployments.deploy(environment.id, keys, strategy=SLOW)
    wait_for_job(orgdeck, job.id, lambda j: j.rollout.current_wave == 1, "wave 1 done")
    return job.id


def waves(app: AppTest) -> list[tuple[str, int, str, str]]:
    """The waves table: (mark, wave, agents, status) per row."""
    table = next(frame.value for frame in app.dataframe if "Wave" in frame.value.columns)
    return list(zip(table[""], table["Wave"], table["Agents"], table["Status"], strict=True))


def click(app: AppTest, label: str) -> AppTest:
    button(app, label).click().run()
    assert not app.exception, app.exception
    return app


def test_a_rollouts_waves_pause_resume_and_abort_from_the_jobs_tab(console, server, org):
    with org_client(server, org) as orgdeck:
        job_id = waiting_rollout(orgdeck)
    app = open_tab(console(PAGE), "Jobs")
    shown = texts(app)
    assert "**Rollout:** waves of 1 · 10 min apart · on failure stop" in shown
    assert "Next wave in" in shown
    assert waves(app) == [
        ("", 1, "agent-0", "complete"),
        ("▶", 2, "agent-1", "pending"),
        ("", 3, "agent-2", "pending"),
    ]
    assert (
        button(app, "Resume").disabled
        and button(app, "Resume").help == "Only a paused rollout can be resumed."
    )
    assert not button(app, "Pause").disabled

    click(app, "Pause")
    shown = texts(app)
    assert f"Paused the rollout of job `{job_id}`: it is now **paused**." in shown
    assert "Paused by admin — resume to continue." in shown
    assert button(app, "Pause").disabled
    assert button(app, "Pause").help == "Only a running or pending rollout can be paused."

    click(app, "Resume")  # the rest of the pause is skipped: wave 2 runs, then the next pause
    assert f"Resumed the rollout of job `{job_id}`" in texts(app)
    with org_client(server, org) as orgdeck:
        wait_for_job(orgdeck, job_id, lambda j: j.rollout.current_wave == 2, "wave 2 done")

    click(app, "Abort…")
    assert "No further wave starts" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.deployments.job(job_id).status == "running"  # nothing before the confirmation
    app.button(key=f"abort_{job_id}_confirm").click().run()
    assert not app.exception, app.exception
    assert f"Aborted the rollout of job `{job_id}`: it is now **aborted**." in texts(app)
    assert [status for *_, status in waves(app)] == ["complete", "complete", "skipped"]
    assert all(button(app, label).disabled for label in ("Pause", "Resume", "Abort…"))
    with org_client(server, org) as orgdeck:
        assert orgdeck.deployments.job(job_id).status == "aborted"


def test_an_action_refused_by_the_service_is_said_in_words(console, server, org):
    with org_client(server, org) as orgdeck:
        job_id = waiting_rollout(orgdeck)
    app = open_tab(console(PAGE), "Jobs")
    click(app, "Abort…")
    with org_client(server, org) as orgdeck:
        orgdeck.deployments.abort(job_id)  # someone else aborts it meanwhile
    app.button(key=f"abort_{job_id}_confirm").click().run()
    assert not app.exception, app.exception
    errors = " ".join(e.value for e in app.error)
    assert "Could not abort the rollout." in errors and "it can no longer be aborted" in errors


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_the_rollout_controls_name_the_role_they_need(server, org, role, monkeypatch):
    with org_client(server, org) as orgdeck:
        waiting_rollout(orgdeck, agents=2)
    signed_in_as(server, org, role, monkeypatch)
    app = open_as(PAGE)
    app.session_state["tab"] = "Jobs"
    app.run()
    for label in ("Pause", "Resume", "Abort…"):
        control = button(app, label)
        if role == "viewer":
            assert control.disabled and control.help == "Needs the operator role; you are a viewer.", label
    if role == "operator":  # the state, not the role, decides
        assert not button(app, "Pause").disabled
        assert button(app, "Resume").help == "Only a paused rollout can be resumed."


def test_deploy_passes_the_strategy_and_the_followed_job_stops_while_paused(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("staging")
        for key in AGENTS:
            versioned_agent(orgdeck, key)
    app = open_tab(console(PAGE), "Deploy")
    assert not app.toggle  # one agent, or none: no waves to choose
    chooser = app.multiselect(key="deploy_agents")
    for key in AGENTS:
        chooser.select(key)
    chooser.run()
    app.toggle(key="deploy_waves").set_value(True).run()
    app.number_input(key="deploy_wave_size_Agents").set_value(2).run()
    app.number_input(key="deploy_pause_seconds").set_value(600).run()
    app.radio(key="deploy_on_failure").set_value("rollback").run()
    assert "waves of 2 · 10 min apart · on failure roll back → 3 wave(s): 2 · 2 · 1 agent(s)" in texts(app)
    click(app, "Preview changes")
    assert (
        "In waves: waves of 2 · 10 min apart · on failure roll back → 3 wave(s): 2 · 2 · 1 agent(s)"
        in texts(app)
    )
    click(app, "Deploy to staging")
    with org_client(server, org) as orgdeck:
        (job,) = orgdeck.deployments.jobs().items
        assert job.rollout is not None
        strategy = job.rollout.strategy
        assert (strategy.wave_size, strategy.pause_seconds, strategy.on_failure) == (2, 600, "rollback")
        assert [wave.agent_stable_keys for wave in job.rollout.waves] == [
            ["alpha", "beta"],
            ["gamma", "delta"],
            ["epsilon"],
        ]
        wait_for_job(orgdeck, job.id, lambda j: j.rollout.current_wave == 1, "wave 1 done")
    app.run()
    click(app, "Pause")
    assert "Paused by admin — resume to continue." in texts(app)
    assert "deploy_following" not in app.session_state  # a paused job is not polled
    click(app, "Resume")  # wave 2 runs, then the job waits ten minutes before wave 3
    assert app.session_state["deploy_following"] == job.id  # moving again: polled again
    with org_client(server, org) as orgdeck:
        wait_for_job(orgdeck, job.id, lambda j: j.rollout.current_wave == 2, "wave 2 done")
        assert orgdeck.deployments.abort(job.id).status == "aborted"
    app.run()
    assert not app.exception, app.exception
    assert "deploy_following" not in app.session_state  # ended: polling stops


def test_a_promotion_passes_its_strategy(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        production = orgdeck.environments.create("production")
        orgdeck.environments.update(production.id, promotes_from=staging.id)
        for key in ("alpha", "beta"):
            versioned_agent(orgdeck, key)
        wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["alpha", "beta"]).id)
    app = open_tab(console(PAGE), "Promotion")
    app.button(key=f"promote_{production.id}").click().run()
    app.toggle(key="promotion_waves").set_value(True).run()
    app.segmented_control(key="promotion_wave_unit").set_value("Percent").run()
    app.number_input(key="promotion_wave_size_Percent").set_value(50).run()
    assert "waves of 50% of the agents · no pause · on failure stop → 2 wave(s): 1 · 1 agent(s)" in texts(app)
    click(app, "Promote now to production")
    with org_client(server, org) as orgdeck:
        job = next(j for j in orgdeck.deployments.jobs().items if j.environment_id == production.id)
    assert job.rollout is not None and job.rollout.strategy.wave_size == "50%"


def test_an_admin_sets_the_rollout_and_promotion_settings(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        production = orgdeck.environments.create("production")
    app = console(ENVIRONMENTS)
    app.session_state["environments_table"] = {"selection": {"rows": [0], "columns": []}}  # production
    app.run()
    key = production.id
    app.text_input(key=f"edit_verification_url_{key}").input("http://127.0.0.1:9/verify")
    app.selectbox(key=f"edit_promotes_from_{key}").set_value(staging.id)
    app.number_input(key=f"edit_soak_minutes_{key}").set_value(30)
    app.toggle(key=f"edit_require_promotion_{key}").set_value(True)
    app.toggle(key=f"edit_production_{key}").set_value(True)
    click(app, "Save rollouts and promotion")
    assert "Saved the rollout and promotion settings of **production**." in texts(app)
    with org_client(server, org) as orgdeck:
        saved = orgdeck.environments.get(production.id)
    assert saved.verification_webhook_url == "http://127.0.0.1:9/verify"
    assert (saved.promotes_from, saved.require_promotion, saved.soak_minutes, saved.production) == (
        staging.id,
        True,
        30,
        True,
    )

    # staging promoting from production would make a loop: said beside the field, nothing saved
    app.session_state["environments_table"] = {"selection": {"rows": [1], "columns": []}}
    app.run()
    app.selectbox(key=f"edit_promotes_from_{staging.id}").set_value(production.id)
    app.toggle(key=f"edit_production_{staging.id}").set_value(True)
    click(app, "Save rollouts and promotion")
    errors = " ".join(e.value for e in app.error)
    assert "Promotes from: promotesFrom would make a loop" in errors
    assert "Could not save" not in errors
    with org_client(server, org) as orgdeck:
        unchanged = orgdeck.environments.get(staging.id)
    assert (unchanged.promotes_from, unchanged.production) == (None, False)

    # none clears the path
    app.session_state["environments_table"] = {"selection": {"rows": [0], "columns": []}}
    app.run()
    app.selectbox(key=f"edit_promotes_from_{key}").set_value("")
    app.text_input(key=f"edit_verification_url_{key}").input("")
    click(app, "Save rollouts and promotion")
    with org_client(server, org) as orgdeck:
        cleared = orgdeck.environments.get(production.id)
    assert (cleared.promotes_from, cleared.verification_webhook_url) == (None, None)


def test_a_protected_environments_verification_webhook_goes_through_review(console, server, org):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production")
        orgdeck.environments.update(production.id, protected=True)
    app = console(ENVIRONMENTS)
    app.text_input(key=f"edit_verification_url_{production.id}").input("http://127.0.0.1:9/verify")
    click(app, "Save rollouts and promotion")
    errors = " ".join(e.value for e in app.error)
    # beside the field, in its label's words, as the webhook URL's refusal is
    assert "Verification webhook URL: " in errors and "only through review" in errors
    assert "Could not save" not in errors
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.get(production.id).verification_webhook_url is None


def test_only_an_admin_changes_the_rollout_and_promotion_settings(server, org, monkeypatch):
    with org_client(server, org) as orgdeck:
        environment = orgdeck.environments.create("production")
    signed_in_as(server, org, "operator", monkeypatch)
    app = open_as(ENVIRONMENTS)
    refusal = "Needs the admin role; you are an operator."
    key = environment.id
    assert button(app, "Save rollouts and promotion").disabled
    assert button(app, "Save rollouts and promotion").help == refusal
    for widget in (
        app.selectbox(key=f"edit_promotes_from_{key}"),
        app.number_input(key=f"edit_soak_minutes_{key}"),
        app.toggle(key=f"edit_require_promotion_{key}"),
        app.toggle(key=f"edit_production_{key}"),
    ):
        assert widget.disabled and widget.help == refusal
    url = app.text_input(key=f"edit_verification_url_{key}")
    assert url.disabled and url.help == refusal
