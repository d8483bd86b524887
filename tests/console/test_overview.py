from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from service.deployments.models import DeploymentJobRow as JobRow
from service.deployments.rollups import rebuild_rollups
from tests.console.conftest import APP, texts
from tests.test_deployment_analytics import org_id_of
from tests.test_deployments import versioned_agent, wait_for_end


def test_overview_counts_what_needs_attention_and_links_to_it(console, server, org, db):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as orgdeck:
        staging = orgdeck.environments.create("staging")
        orgdeck.environments.create("partner", target="webhook", webhook_url="https://partner.example/hook")
        versioned_agent(orgdeck, "alpha")
        versioned_agent(orgdeck, "beta")
        failed = wait_for_end(orgdeck, orgdeck.deployments.deploy(staging.id, ["alpha"]).id)
    with db.session(write=True) as session:  # the job failed, today
        session.get(JobRow, failed.id).status = "error"
        rebuild_rollups(session, org_id=org_id_of(session, org.slug))
    app = console()
    assert not app.exception, app.exception
    shown = texts(app)
    assert "Test Org" in shown and org.slug in shown
    tiles = {metric.label: metric.value for metric in app.metric}
    assert tiles == {
        "Agents": "2",
        "Environments": "2",
        "Drifted": "0",
        "Stale": "0",
        "Error": "0",
        "Failed jobs, 7 days": "1",
        "Dead deliveries, 7 days": "0",
        "Policy violations": "0",
    }
    assert "**partner** is a webhook target without a signing key" in shown
    assert "Job to **staging** error" in shown
    assert "This is demo data" not in shown  # a real service, not the embedded demo
    links = {link.proto.label: link.proto for link in app.get("page_link") if link.proto.label}
    failed_jobs = links["Failed jobs"]
    assert failed_jobs.page == "deployments"
    today = datetime.now(UTC).date()
    assert parse_qs(failed_jobs.query_string) == {
        "tab": ["Jobs"],
        "job_status": ["error", "partial", "rolled_back"],
        "job_days": [str(today - timedelta(days=6)), str(today)],
    }
    assert parse_qs(links["Dead deliveries"].query_string) == {
        "log_status": ["dead"],
        "log_dates": [str(today - timedelta(days=6)), str(today)],
    }
    assert parse_qs(links["Drifted agents"].query_string) == {"state": ["drifted"]}
    assert "Service ok · database ok" in shown


def test_sidebar_says_which_service_and_org(console, server, org):
    app = console()
    sidebar = " ".join(str(e.value) for e in (*app.sidebar.markdown, *app.sidebar.caption))
    assert org.slug in sidebar
    assert server.url in sidebar


def test_a_refused_key_is_explained_not_a_traceback(server, monkeypatch):
    monkeypatch.setenv("ORGDECK_API_URL", server.url)
    monkeypatch.setenv("ORGDECK_API_KEY", "odk_this_is_not_valid")
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception
    assert "malformed" in app.sidebar.error[0].value
    assert "Not connected" in texts(app)


def test_unreachable_service_is_explained(monkeypatch):
    monkeypatch.setenv("ORGDECK_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("ORGDECK_API_KEY", "odk_whatever")
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception
    assert "Is the service running" in app.sidebar.error[0].value
