"""Policy checks on the deployment preview: 200 agents with 50 policies against the same without.

    .venv/bin/python bench/governance.py                 # fresh SQLite, about three minutes
    .venv/bin/python -m bench.governance --database-url postgresql://postgres@127.0.0.1:5432/bench

Starts the service and makes three organizations with the same 200 versioned agents (models,
tags, temperatures and token limits varied; each references a prompt, resolved with its content on
every evaluation) and one environment each. `plain` has no policy; `governed` has 50 policies with
checks (model deny lists, temperature and token caps, required tags, providers per environment, a
phrase no prompt may contain), half `warn` and half `audit`, scoped to all, which a few agents
break (as in an organization that follows its rules); `strict` has 50 such policies set so tight
that about a third of the 10,000 pairs of agent and policy break them (the preview answers
thousands of violations). Then previews deploying all 200 agents in each organization in turn,
round after round, and prints each median and its ratio to `plain` (reach for `governed`: ≤ 1.5x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import OrgKey, orgdeck_service, scratch_directory

AGENTS = 200
POLICIES = 50
WARMUP = 3
ROUNDS = 15
REACH = 1.5
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-3.5-turbo", "claude-3-5-sonnet")
# What the governed organization's policies deny or cap: a few of its agents break them.
RETIRED = ("gpt-3.5-turbo", "gpt-4-0314", "text-davinci-003", "claude-2")
CHECKS = (
    ('agent.model != "{model}"', "model {model} is not allowed"),
    ("double(agent.providerConfig.temperature) <= {cap}", "temperature above {cap}"),
    ("!has(agent.providerConfig.maxTokens) || agent.providerConfig.maxTokens <= {tokens}", "too many tokens"),
    ('"{tag}" in agent.tags || environment.name != "production"', "tag {tag} is required in production"),
    ('agent.provider == "openai" || environment.name != "production"', "only openai in production"),
    ('!agent.prompts.exists(p, p.content.contains("{phrase}"))', "a prompt says {phrase}"),
)
# The prompt every agent references, by its newest version: each preview resolves it with its content.
PROMPT_VERSIONS = ("You sort support tickets.", "You sort support tickets by urgency, politely.")


def seed_agents(http: httpx.Client, org: OrgKey) -> str:
    """The 200 agents, each with a version and a prompt reference, and the environment `production`;
    its id."""
    _ok(http.post("/api/registries", json={"orgSlug": org.slug, "name": "prompts"}, headers=org.headers))
    for text in PROMPT_VERSIONS:
        publish = {"registryRef": f"{org.slug}/prompts", "name": "system", "content": text}
        _ok(http.post("/api/registries/artifacts", json=publish, headers=org.headers))
    for number in range(AGENTS):
        body = {
            "orgSlug": org.slug,
            "stableKey": f"agent-{number:03d}",
            "provider": "openai",
            "tags": [f"team-{number % 7}", "pci" if number % 3 else "public"],
            "providerConfig": {
                "model": MODELS[number % 2] if number % 25 else "gpt-3.5-turbo",
                "temperature": round((number % 10) / 10, 1),
                "maxTokens": 256 * (1 + number % 8),
            },
            "promptReferences": {"system": f"{org.slug}/prompts/system"},
        }
        _ok(http.post("/api/agents", json=body, headers=org.headers))
        _ok(
            http.post(
                f"/api/agents/agent-{number:03d}/versions", json={"orgSlug": org.slug}, headers=org.headers
            )
        )
    environment = {"orgSlug": org.slug, "name": "production"}
    return _ok(http.post("/api/environments", json=environment, headers=org.headers))["id"]


def seed_policies(http: httpx.Client, org: OrgKey, *, strict: bool) -> None:
    for number in range(POLICIES):
        check, message = CHECKS[number % len(CHECKS)]
        values = (
            {
                "model": MODELS[number % len(MODELS)],
                "cap": round(0.3 + (number % 7) / 10, 1),
                "tokens": 512 * (1 + number % 4),
                "tag": f"team-{number % 7}",
                "phrase": "urgency",
            }
            if strict
            else {
                "model": RETIRED[number % len(RETIRED)],
                "cap": 0.9,
                "tokens": 2048,
                "tag": "pci",
                "phrase": "password",
            }
        )
        body = {
            "orgSlug": org.slug,
            "name": f"policy-{number:02d}",
            "severity": "warning",
            "ruleText": message.format(**values),
            "check": check.format(**values),
            "message": message.format(**values),
            "enforcement": "warn" if number % 2 else "audit",
        }
        _ok(http.post("/api/governance/policies", json=body, headers=org.headers))


def preview(http: httpx.Client, org: OrgKey, environment_id: str) -> dict:
    body = {
        "orgSlug": org.slug,
        "environmentId": environment_id,
        "agentStableKeys": [f"agent-{number:03d}" for number in range(AGENTS)],
    }
    return _ok(http.post("/api/agents/deployments/preview", json=body, headers=org.headers))


def _ok(answer: httpx.Response) -> dict:
    if answer.status_code != 200:
        raise SystemExit(f"{answer.request.method} {answer.request.url}: {answer.status_code} {answer.text}")
    return answer.json()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.governance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a scratch database instead of a fresh SQLite file")
    args = parser.parse_args()
    with scratch_directory() as workdir, orgdeck_service(workdir, database_url=args.database_url) as service:
        orgs = {name: service.create_org(name) for name in ("plain", "governed", "strict")}
        with httpx.Client(base_url=f"http://127.0.0.1:{service.port}", timeout=120) as http:
            environments = {name: seed_agents(http, org) for name, org in orgs.items()}
            seed_policies(http, orgs["governed"], strict=False)
            seed_policies(http, orgs["strict"], strict=True)
            found = {
                name: len(preview(http, org, environments[name])["violations"]) for name, org in orgs.items()
            }
            timings: dict[str, list[float]] = {name: [] for name in orgs}
            for round_number in range(WARMUP + ROUNDS):
                for name, org in orgs.items():
                    started = time.perf_counter()
                    preview(http, org, environments[name])
                    if round_number >= WARMUP:
                        timings[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(seconds) for name, seconds in timings.items()}
    print(
        f"database: {args.database_url or 'SQLite (fresh file)'}; preview of {AGENTS} agents, {ROUNDS} rounds"
    )
    for name, median in medians.items():
        ratio = median / medians["plain"]
        policies = "no policies" if name == "plain" else f"{POLICIES} policies, {found[name]} violations"
        print(f"{name:>9}: median {median * 1000:7.1f} ms  {ratio:.2f}x  ({policies})")
    met = medians["governed"] / medians["plain"] <= REACH
    print(f"reach: governed ≤ {REACH}x plain: {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
