from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from api.deployments import DEFAULT_ANALYTICS_DAYS
from components.formatting import short_duration
from service.agents.demo import seed_agents
from service.deployments.demo import seed_deployment_history, seed_deployments
from service.deployments.models import DeploymentJobRow as JobRow
from service.deployments.rollups import rebuild_rollups
from service.environments.demo import seed_environments
from tests.console.conftest import texts
from tests.test_deployment_analytics import org_id_of
from tests.test_deployments import versioned_agent, wait_for_end

PAGE = "pages/deployments.py"
TAB = "tab"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def open_tab(app: AppTest, tab: str) -> AppTest:
    app.session_state[TAB] = tab
    app.run()
    assert not app.exception, app.exception
    return app


def button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def follow_until_done(app: AppTest, timeout: float = 30) -> None:
    """Rerun as the page's timer would until the followed job's card says how it ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if app.success or app.warning or app.error:
            return
        time.sleep(0.3)
        app.run()
    raise AssertionError(f"the followed job did not end in {timeout} s:\n{texts(app)}")


def test_an_org_without_environments_says_where_to_start(console):
    app = console(PAGE)
    assert "No environments yet" in texts(app)
    assert not app.get("plotly_chart")


def test_an_org_without_deployments_shows_empty_states_not_empty_charts(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("staging")
    app = console(PAGE)
    assert "No deployments between these dates" in texts(app)
    assert "No agents to show yet" in texts(app)
    assert not app.get("plotly_chart")
    open_tab(app, "Deploy")
    assert "No agent has a version yet" in texts(app)
    open_tab(app, "Jobs")
    assert "No deployment jobs yet" in texts(app)


def test_preview_deploy_follow_and_open_the_job(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        versioned_agent(orgdeck, "alpha")
        versioned_agent(orgdeck, "beta")
        wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["alpha"]).id)
    app = open_tab(console(PAGE), "Deploy")
    app.multiselect(key="deploy_agents").select("alpha").select("beta").run()
    app.text_input(key="deploy_model").input("gpt-4o")
    button(app, "Preview changes").click().run()
    assert not app.exception, app.exception
    assert "2 agent(s) to **staging** (1 added, 1 changed)" in texts(app)
    diff = app.dataframe[0].value
    rows = set(zip(diff["Agent"], diff["Field"], diff["Change"], diff["Before"], diff["After"], strict=True))
    assert ("alpha", "model", "changed", "gpt-4o-mini", "gpt-4o") in rows
    assert ("beta", "version", "added", "", "1") in rows
    assert not any(agent == "alpha" and field == "version" for agent, field, *_ in rows)

    button(app, "Deploy to staging").click().run()
    assert not app.exception, app.exception
    follow_until_done(app)
    assert "Deployed 2 agents" in texts(app)
    assert "Preview:" not in texts(app)
    with org_client(server, org) as orgdeck:
        (job, _first) = orgdeck.deployments.jobs().items
    assert job.status == "complete"
    assert all(agent.status == "complete" for agent in job.agents)

    button(app, "Open in Jobs").click().run()
    assert not app.exception, app.exception
    assert app.session_state[TAB] == "Jobs"
    listed = app.dataframe[0].value
    assert list(listed["Status"]) == ["complete", "complete"]
    assert list(listed["Agents"]) == [2, 1]
    assert f"**Job `{job.id}`**" in texts(app)  # the job opened is the one shown below the table
    results = app.dataframe[1].value
    assert list(zip(results["Agent"], results["Result"], strict=True)) == [
        ("alpha", "complete"),
        ("beta", "complete"),
    ]


def test_a_refused_preview_is_explained_and_nothing_deployed(console, server, org):
    with org_client(server, org) as orgdeck:
        orgdeck.environments.create("staging")
        versioned_agent(orgdeck, "alpha")
    app = open_tab(console(PAGE), "Deploy")
    app.multiselect(key="deploy_agents").select("alpha").run()
    app.text_input(key="deploy_versions").input("alpha=7")
    button(app, "Preview changes").click().run()
    assert not app.exception, app.exception
    # Said next to the field it is about, and the versions typed are still there to correct.
    assert [e.value for e in app.error] == ["Versions: No such agent versions: alpha@7"]
    assert app.text_input(key="deploy_versions").value == "alpha=7"
    assert not any(b.label.startswith("Deploy to") for b in app.button)
    with org_client(server, org) as orgdeck:
        assert orgdeck.deployments.jobs().items == []


def seed_demo(server, org, db) -> None:
    """The demo's agents and deployments in the test org: its jobs run, then its quarter of history."""
    with org_client(server, org) as orgdeck:
        seed_environments(orgdeck)
        seed_agents(orgdeck)
        seed_deployments(orgdeck)
        for job in orgdeck.deployments.jobs().items:
            wait_for_end(orgdeck, job.id)
    seed_deployment_history(db, org_slug=org.slug)


def figure(chart) -> dict:
    return json.loads(chart.proto.spec)


def test_overview_draws_metric_tiles_heatmaps_and_the_status_matrix(console, server, org, db):
    seed_demo(server, org, db)
    with org_client(server, org) as orgdeck:  # the demo's production environments, for lead time
        for environment in orgdeck.environments.list().items:
            if environment.name.endswith("production"):
                orgdeck.environments.update(environment.id, production=True)
    app = console(PAGE)
    tiles = {metric.label: metric.value for metric in app.metric}
    assert set(tiles) == {
        "Deployment frequency",
        "Median lead time",
        "Change failure rate",
        "Median job duration",
        "Median time to restore",
    }
    # Says over how many days it averages: the demo's history of about three months.
    frequency = re.fullmatch(r"(\d+\.\d)/day over (\d+) days", tiles["Deployment frequency"])
    assert frequency and float(frequency[1]) > 0 and 80 <= int(frequency[2]) <= 90
    assert "—" not in tiles.values()
    # The trend leaves out the week still under way (today is not over), which would read as a drop.
    today = datetime.now(UTC).date()
    with org_client(server, org) as orgdeck:
        start = today - timedelta(days=DEFAULT_ANALYTICS_DAYS - 1)
        weeks = orgdeck.deployments.metrics(start=start, end=today).periods
    rates = [week.deployments_per_day for week in weeks[:-1]]
    shown = next(metric for metric in app.metric if metric.label == "Deployment frequency")
    assert shown.delta == ("-" if rates[-1] < rates[-2] else "+") + f"{abs(rates[-1] - rates[-2]):.1f}/day"
    by_day, matrix, hours = (figure(chart) for chart in app.get("plotly_chart"))
    cells = coloured_layer(by_day)
    assert cells["y"] == ["development", "eu-production", "production", "staging"]
    assert len(cells["x"]) == 90 and total(cells["z"]) > 1000
    # The colour scale's ticks are whole numbers: steps of a whole count, from 0.
    scale = cells["colorbar"]
    assert scale["tick0"] == 0 and scale["dtick"] >= 1 and float(scale["dtick"]).is_integer()
    # Every row's total at its right, under a "Total" heading.
    totals = [a["text"] for a in by_day["layout"]["annotations"]]
    assert totals[-1] == "<b>Total</b>" and len(totals) == 5
    assert sum(int(text.replace(",", "")) for text in totals[:-1]) == total(cells["z"])
    # Agents by development, eu-production, production, staging: the demo's stale and failing pairs.
    cells = dict(zip(matrix["data"][0]["y"], matrix["data"][0]["customdata"], strict=True))
    assert "Stale" in cells["code-reviewer"][2] and "running v2, newest v3" in cells["code-reviewer"][2]
    assert "Error" in cells["escalation-router"][1] and "SLACK_WEBHOOK_URL" in cells["escalation-router"][1]
    assert "draft.providerConfig.max_refund_cents" in cells["refund-assistant"][1]
    assert "Stale **2**" in texts(app) and "Error **1**" in texts(app)
    # Working days in working hours: the weekday rows outweigh the weekend ones many times.
    z = coloured_layer(hours)["z"]
    assert coloured_layer(hours)["y"] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert total(z[:5]) > 10 * total(z[5:])

    app.segmented_control(key="metric").set_value("failure_rate").run()
    assert not app.exception, app.exception
    by_day = figure(app.get("plotly_chart")[0])
    assert "Failure rate per environment and day" in texts(app)
    rates = coloured_layer(by_day)
    assert max(v for row in rates["z"] for v in row if v is not None) <= 1


def coloured_layer(spec: dict) -> dict:
    """The heatmap layer coloured by the metric (under it: flat layers for no jobs, too few)."""
    [layer] = [trace for trace in spec["data"] if trace["type"] == "heatmap" and "colorbar" in trace]
    return layer


def total(z: list[list[float | None]]) -> float:
    return sum(value for row in z for value in row if value is not None)


def test_heatmap_cells_tell_no_jobs_from_none_failed_and_few_jobs_from_a_rate(console, server, org, db):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        orgdeck.environments.create("production")
        versioned_agent(orgdeck, "alpha")
        first = wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["alpha"]).id)
    with db.session(write=True) as session:  # one job today, and it failed
        session.get(JobRow, first.id).status = "error"
        rebuild_rollups(session, org_id=org_id_of(session, org.slug))
    app = console(PAGE)
    app.segmented_control(key="metric").set_value("failure_rate").run()
    spec = figure(app.get("plotly_chart")[0])
    no_jobs, too_few, rates = (trace for trace in spec["data"] if trace["type"] == "heatmap")
    today = len(rates["x"]) - 1
    # production had no jobs: the no-jobs layer; staging's one failed job of one: too few to colour.
    assert no_jobs["z"][0][today] == 1 and rates["z"][0][today] is None  # production sorts first
    assert too_few["z"][1][today] == 1 and rates["z"][1][today] is None
    assert "1 job, 1 failed (100%)" in too_few["customdata"][1][today]
    assert "too few jobs to rate" in too_few["customdata"][1][today]
    assert [a["text"] for a in spec["layout"]["annotations"]] == ["no jobs", "100% of 1", "<b>Total</b>"]
    # The cell can be clicked: an invisible point carries its environment and day.
    [targets] = [trace for trace in spec["data"] if trace["type"] == "scatter"]
    assert targets["customdata"] == [[staging.id, rates["x"][today]]]


def test_the_demo_history_is_written_once(server, org, db):
    seed_demo(server, org, db)
    with org_client(server, org) as orgdeck:
        before = orgdeck.deployments.history(limit=1).total
        seed_deployments(orgdeck)
        seed_deployment_history(db, org_slug=org.slug)
        assert orgdeck.deployments.history(limit=1).total == before


def test_jobs_filter_by_status_and_environment(console, server, org):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        production = orgdeck.environments.create("production")
        versioned_agent(orgdeck, "alpha")
        for environment in (staging, production, production):
            wait_for_end(orgdeck, orgdeck.deployments.deploy(environment.id, ["alpha"]).id)
    app = open_tab(console(PAGE), "Jobs")
    assert list(app.dataframe[0].value["Environment"]) == ["production", "production", "staging"]
    app.selectbox(key="job_env").select(staging.id).run()
    assert list(app.dataframe[0].value["Environment"]) == ["staging"]
    app.multiselect(key="job_status").select("error").run()
    assert "No job matches these filters" in texts(app)
    app.multiselect(key="job_status").unselect("error").run()
    today = datetime.now(UTC).date()
    app.date_input(key="job_days").set_value((today - timedelta(days=1), today - timedelta(days=1))).run()
    assert "No job matches these filters" in texts(app)
    app.date_input(key="job_days").set_value((today, today)).run()
    assert list(app.dataframe[0].value["Environment"]) == ["staging"]


def test_a_job_an_approved_request_started_names_who_asked_and_who_approved(console, server, org):
    with org_client(server, org) as orgdeck:
        versioned_agent(orgdeck, "alpha")
        production = orgdeck.environments.create("production")
        orgdeck.environments.update(production.id, protected=True)
        keys = {
            name: orgdeck.api_keys.create(
                f"{name}-key", member_id=orgdeck.members.create(f"{name}@example.com", name, "operator").id
            ).key
            for name in ("ana", "bo")
        }
    with OrgdeckClient(server.url, keys["ana"], org_slug=org.slug) as ana:
        opened = ana.change_requests.open(
            "deployment", {"environmentId": production.id, "agentStableKeys": ["alpha"]}, "Release"
        )
    with OrgdeckClient(server.url, keys["bo"], org_slug=org.slug) as bo:
        bo.change_requests.approve(opened.id)
    app = open_tab(console(PAGE), "Jobs")
    assert (
        f"Applied by change request `{opened.id}`: asked by ana@example.com, approved by bo@example.com"
        in texts(app)
    )
    link = next(e for e in app.get("page_link") if e.proto.label == "Open the request")
    assert link.proto.page.endswith("changes") and f"open={opened.id}" in link.proto.query_string


def test_a_revoked_key_is_explained_not_a_traceback(console, server, org):
    app = console(PAGE)
    with org_client(server, org) as orgdeck:
        (console_key,) = orgdeck.api_keys.list().items
        other = orgdeck.api_keys.create("rescue").key
    with OrgdeckClient(server.url, other, org_slug=org.slug) as rescuer:
        rescuer.api_keys.revoke(console_key.id)
    app.run()
    assert not app.exception, app.exception
    assert "Could not list environments" in texts(app)
    assert "The API key was refused" in texts(app)


def test_the_metric_tiles_open_the_jobs_they_count(console, server, org, db):
    with org_client(server, org) as orgdeck:
        staging = orgdeck.environments.create("staging")
        versioned_agent(orgdeck, "alpha")
        jobs = [wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["alpha"]).id) for _ in range(3)]
    with db.session(write=True) as session:  # one of the three failed
        session.get(JobRow, jobs[0].id).status = "error"
        rebuild_rollups(session, org_id=org_id_of(session, org.slug))
    app = console(PAGE)
    frequency = next(m for m in app.metric if m.label == "Deployment frequency")
    assert "Successful (complete) jobs per elapsed day: 2 from" in frequency.help
    button(app, "Failed jobs (1)").click().run()
    assert app.session_state[TAB] == "Jobs"
    assert list(app.dataframe[0].value["Status"]) == ["error"]
    app = console(PAGE)
    button(app, "Complete jobs (2)").click().run()
    assert list(app.dataframe[0].value["Status"]) == ["complete", "complete"]


def test_the_lead_time_tile_counts_production_at_once_and_says_what_it_is(console, server, org):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production")
        versioned_agent(orgdeck, "alpha")
        wait_for_end(orgdeck, orgdeck.deployments.deploy(production.id, ["alpha"]).id)
    app = console(PAGE)
    lead = next(m for m in app.metric if m.label == "Median lead time")
    assert lead.value == "—"  # not a production environment yet
    assert "reaches a production environment" in lead.help
    with org_client(server, org) as orgdeck:
        orgdeck.environments.update(production.id, production=True)
        seconds = orgdeck.deployments.metrics().totals.lead_time
    assert seconds is not None and seconds > 0
    app = console(PAGE)
    lead = next(m for m in app.metric if m.label == "Median lead time")
    assert lead.value == short_duration(seconds)
