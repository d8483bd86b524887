"""The demo organization's policies with checks: on first start the compliance view has warn and
audit violations to show, and the demo's own deployments are not refused."""

from __future__ import annotations

from service.agents.demo import seed_agents
from service.deployments.demo import seed_deployments
from service.environments.demo import seed_environments
from service.governance.demo import DEMO_CHECKS, seed_governance
from service.tools.demo import seed_tools
from tests.test_deployments import wait_for_end


def test_the_demo_shows_warn_and_audit_violations_and_deploys_all_the_same(client):
    seed_environments(client)
    seed_tools(client)
    seed_governance(client)
    seed_agents(client)
    seed_deployments(client)
    assert {wait_for_end(client, job.id).status for job in client.deployments.jobs().items} == {"complete"}

    checked = {p.name: p for p in client.policies.list().items if p.check}
    assert set(checked) == set(DEMO_CHECKS)
    for policy in checked.values():
        results = client.policies.test(policy.id)
        assert results.passed, results
    compliance = client.policies.compliance()
    found = {(v.policy_name, v.enforcement) for v in compliance.violations}
    assert found == {("Cite sources in answers", "warn"), ("Keep records of refunds", "audit")}
    assert {v.agent for v in compliance.violations if v.policy_name == "Keep records of refunds"} == {
        "chargeback-analyst"
    }
