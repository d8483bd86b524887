"""A reviewed deployment in headless Chromium: one member requests it on the Deployments page of
their console, another approves it on the Changes page of theirs, and the job runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from api import OrgdeckClient
from tests.browser.conftest import assert_no_exception, choose, open_page
from tests.conftest import ROOT, wait_until_up
from tests.test_deployments import versioned_agent, wait_for_end

pytestmark = pytest.mark.browser


@contextmanager
def console_as(api_url: str, api_key: str, log_dir: Path) -> Iterator[str]:
    """A console of the test service acting with `api_key` (a member's), in a process of its own."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGDECK_")}
    env.update({"ORGDECK_API_URL": api_url, "ORGDECK_API_KEY": api_key})
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    with (log_dir / f"console-{port}.log").open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(url + "/_stcore/health", process)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


def test_request_in_one_console_approve_in_another_and_the_job_completes(page, server, org, tmp_path):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
        keys = {}
        for name in ("ana", "bo"):
            member = admin.members.create(f"{name}@example.com", name.title(), "operator")
            keys[name] = admin.api_keys.create(f"{name}-key", member_id=member.id).key

    with console_as(server.url, keys["ana"], tmp_path) as ana:
        open_page(page, ana, "deployments", "Deployments")
        page.get_by_role("tab", name="Deploy").click()
        choose(page.locator("[data-testid=stMain]"), "Agents", "triage · v1")
        page.get_by_role("button", name="Preview changes").click()
        page.get_by_text("production is protected").wait_for(timeout=60_000)
        assert page.get_by_role("button", name="Deploy to production").count() == 0
        page.get_by_role("textbox", name="Reason").fill("First release")
        page.get_by_role("textbox", name="Reason").press("Enter")
        page.get_by_role("button", name="Request deployment to production").click()
        page.get_by_text("Requested the deployment to").wait_for(timeout=60_000)
        assert_no_exception(page)

    with console_as(server.url, keys["bo"], tmp_path) as bo:
        open_page(page, bo, "changes", "Asked by", "First release")
        page.get_by_role("textbox", name="Comment").fill("Looks right")
        page.get_by_role("button", name="Approve").click()
        page.get_by_text("Approved and applied").wait_for(timeout=60_000)
        assert_no_exception(page)

    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (applied,) = admin.change_requests.list().items
        assert applied.status == "applied" and applied.approvals[0].comment == "Looks right"
        job = wait_for_end(admin, applied.result["jobId"])
    assert job.status == "complete" and [agent.version for agent in job.agents] == [1]
