"""`orgdeck deploy`, `orgdeck promote`, `orgdeck jobs`, `orgdeck rollout` and `orgdeck status`:
preview, run and follow deployments and promotions, steer rollouts, and drift."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

import click
from rich.markup import escape

from api.cli.context import fail, json_option, resolve_environment, with_client
from api.cli.output import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_POLICY_DENIED,
    EXIT_USAGE,
    err,
    out,
    print_json,
    shown,
    table,
)
from api.cli.records import by_cursor, collect, paged, print_more
from api.client import OrgdeckClient
from api.deployments import (
    AGENT_STATES,
    FINISHED_JOB_STATUSES,
    JOB_STATUSES,
    AgentPreview,
    DeploymentJob,
    DeploymentPreview,
    FieldChange,
    StatusMatrix,
)
from api.errors import BadRequest

DEFAULT_WAIT_SECONDS = 600
POLL_SECONDS = (0.5, 1.0, 2.0)  # quick at first, then every two seconds
PREVIEW_MARKS = {"added": "[green]+[/]", "changed": "[yellow]~[/]", "unchanged": "[dim]=[/]"}
CHANGE_MARKS = {"added": "[green]+[/]", "removed": "[red]-[/]", "changed": "[yellow]~[/]"}
JOB_COLOURS = {
    "complete": "green",
    "error": "red",
    "partial": "yellow",
    "running": "cyan",
    "pending": "dim",
    "paused": "magenta",
    "aborted": "yellow",
    "rolled_back": "red",
}
STATE_COLOURS = {
    "in_sync": "green",
    "drifted": "yellow",
    "stale": "magenta",
    "error": "red",
    "not_deployed": "dim",
}
# States `status --exit-code` fails on: what runs is not what was deployed, or did not deploy.
FAILING_STATES = frozenset({"drifted", "error"})


class _DeployGroup(click.Group):
    """`deploy preview …` previews; anything else (`deploy ENV AGENT…`) is `deploy run …`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(
    name="deploy",
    cls=_DeployGroup,
    epilog="""\b
Examples:
  orgdeck deploy preview production support-bot triage --exit-code
  orgdeck deploy production support-bot triage --wait --timeout 600
  orgdeck deploy production support-bot --agent-version support-bot=3 --wait   # roll back
  orgdeck deploy rollback production support-bot --wait
  orgdeck deploy run preview support-bot   # an environment named "preview"
""",
)
def group() -> None:
    """Preview a deployment, or deploy agents to an environment (`deploy ENV AGENT…`)."""


def deployment_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("environment", metavar="ENV"),
        click.argument("agents", metavar="AGENT...", nargs=-1, required=True),
        click.option("--model", metavar="NAME", help="Run every agent with this model."),
        click.option("--prompt", metavar="NAME=VERSION", help="Pin prompt NAME to an artifact VERSION."),
        click.option(
            "--tool", "tools", metavar="KEY", multiple=True, help="Tool key the agents get (repeatable)."
        ),
        click.option(
            "--agent-version",
            "agent_versions",
            metavar="KEY=N",
            multiple=True,
            help="Deploy version N of agent KEY instead of its newest (repeatable; rolls back).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def deployment(
    client: OrgdeckClient,
    environment: str,
    agents: tuple[str, ...],
    model: str | None,
    prompt: str | None,
    tools: tuple[str, ...],
    agent_versions: tuple[str, ...],
) -> dict[str, Any]:
    """The arguments of a preview or deployment, as a person typed them, in the client's terms."""
    prompt_name = prompt_version = None
    if prompt is not None:
        prompt_name, _, prompt_version = prompt.partition("=")
        if not prompt_name or not prompt_version:
            fail(f"--prompt takes NAME=VERSION (got '{prompt}')", EXIT_USAGE)
    versions = {}
    for pair in agent_versions:
        key, _, number = pair.partition("=")
        if not key or not number.isdigit():
            fail(f"--agent-version takes KEY=N, e.g. support-bot=3 (got '{pair}')", EXIT_USAGE)
        versions[key] = int(number)
    return {
        "environment_id": resolve_environment(client, environment).id,
        "agent_stable_keys": list(agents),
        "model": model,
        "prompt_name": prompt_name,
        "version": prompt_version,
        "tool_refs": list(tools) or None,
        "agent_versions": versions or None,
    }


Answer = TypeVar("Answer")


def with_known_agents(client: OrgdeckClient, agents: tuple[str, ...], call: Callable[[], Answer]) -> Answer:
    """The call's answer; when the service refuses the agents, an unknown one is a not-found (exit 4)
    like any other name, which its own 404 says (asked only then: a good run costs nothing more)."""
    try:
        return call()
    except BadRequest as error:
        if any(detail.field == "agentStableKeys" for detail in error.details):
            for key in agents:
                client.agents.get(key)
        raise


@group.command(
    epilog="""\b
Examples:
  orgdeck deploy preview production support-bot triage
  orgdeck deploy preview production support-bot --exit-code || echo "something would change"
  orgdeck deploy preview env_01j... support-bot --model gpt-4o --json
"""
)
@deployment_options
@click.option(
    "--exit-code",
    is_flag=True,
    help="Exit 5 when a deny policy would refuse it, else 1 when anything would change, 0 when nothing would.",
)
@json_option
@with_client
def preview(client: OrgdeckClient, exit_code: bool, as_json: bool, **arguments: Any) -> None:
    """What deploying AGENT… (stable keys) to ENV (a name or id) would change, field by field.

    Nothing is deployed.
    """
    result = with_known_agents(
        client, arguments["agents"], lambda: client.deployments.preview(**deployment(client, **arguments))
    )
    if as_json:
        print_json(result)
    else:
        print_preview(result, arguments["environment"])
    raise click.exceptions.Exit(_preview_exit(result) if exit_code else EXIT_OK)


def _preview_exit(result: DeploymentPreview) -> int:
    if any(v.enforcement == "deny" and v.exception_id is None for v in result.violations):
        return EXIT_POLICY_DENIED
    return EXIT_FAILURE if result.has_changes else EXIT_OK


def print_preview(result: DeploymentPreview, environment: str) -> None:
    console = out()
    changing = sum(agent.status != "unchanged" for agent in result.agents)
    if changing:
        console.print(
            f"Deploying to {escape(environment)} would change {changing} of {len(result.agents)} agents:"
        )
    else:
        console.print(f"Deploying to {escape(environment)} would change nothing.")
    for agent in result.agents:
        console.print(
            f"{PREVIEW_MARKS[agent.status]} [bold]{escape(agent.stable_key)}[/]  {_versions(agent)}"
        )
        width = max((len(change.field) for change in agent.changes), default=0)
        for change in agent.changes:
            console.print(
                f"    {CHANGE_MARKS[change.kind]} {escape(change.field.ljust(width))}  {_change(change)}"
            )
    if result.violations:
        console.print(f"Policies broken ({len(result.violations)}):")
    for violation in result.violations:
        excepted = f" (exception {violation.exception_id})" if violation.exception_id else ""
        console.print(
            f"  [bold]{violation.enforcement}[/] {escape(violation.agent)}  "
            f"{escape(violation.policy_name)}: {escape(violation.message)}{escape(excepted)}"
        )


def _versions(agent: AgentPreview) -> str:
    if agent.status == "added":
        return f"not deployed yet → version {agent.target_version}"
    if agent.status == "unchanged":
        return f"[dim]unchanged at version {agent.target_version}[/]"
    return f"version {shown(agent.current_version)} → {agent.target_version}"


def _change(change: FieldChange) -> str:
    if change.kind == "added":
        return escape(shown(change.after))
    if change.kind == "removed":
        return f"[dim]{escape(shown(change.before))}[/]"
    return f"{escape(shown(change.before))} → {escape(shown(change.after))}"


def strategy_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--strategy",
        metavar="SPEC",
        help="Deploy in waves: waveSize=N|N%,pauseSeconds=S,onFailure=stop|rollback, or the same as a "
        "JSON object.",
    )(command)


def parse_strategy(spec: str | None) -> dict[str, Any] | None:
    """A --strategy as the wire object: JSON, or comma-separated KEY=VALUE pairs (numbers as numbers).
    The service checks the values."""
    if spec is None:
        return None
    if spec.lstrip().startswith("{"):
        try:
            parsed = json.loads(spec)
        except ValueError as error:
            fail(f"--strategy is not valid JSON: {error}", EXIT_USAGE)
        if not isinstance(parsed, dict):
            fail("--strategy JSON must be an object", EXIT_USAGE)
        return parsed
    strategy: dict[str, Any] = {}
    for pair in spec.split(","):
        key, _, value = pair.strip().partition("=")
        if not key or not value:
            fail(
                f"--strategy takes KEY=VALUE pairs, e.g. waveSize=2,onFailure=rollback (got '{pair}')",
                EXIT_USAGE,
            )
        strategy[key] = int(value) if value.isdigit() else value
    return strategy


def wait_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--wait", is_flag=True, help="Follow the job to its end: exit 0 complete, 1 any other end."
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=DEFAULT_WAIT_SECONDS,
            show_default=True,
            metavar="S",
            help="With --wait: give up after S seconds and exit 2 (the job goes on).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@group.command(
    epilog="""\b
Examples:
  orgdeck deploy production support-bot triage
  orgdeck deploy production support-bot --wait --timeout 900
  orgdeck deploy production support-bot --wait --idempotency-key "deploy-$GITHUB_RUN_ID"
  orgdeck deploy production a b c d --strategy waveSize=2,pauseSeconds=60,onFailure=rollback --wait
"""
)
@deployment_options
@strategy_option
@wait_options
@click.option(
    "--idempotency-key",
    metavar="KEY",
    help="Deploy at most once for KEY, however often this runs (e.g. a CI run's id); default: one per call.",
)
@json_option
@with_client
def run(
    client: OrgdeckClient,
    strategy: str | None,
    wait: bool,
    timeout: float,
    idempotency_key: str | None,
    as_json: bool,
    **arguments: Any,
) -> None:
    """Deploy AGENT… (stable keys) to ENV (a name or id): starts a job that a worker runs."""
    waves = parse_strategy(strategy)
    job = with_known_agents(
        client,
        arguments["agents"],
        lambda: client.deployments.deploy(
            **deployment(client, **arguments), strategy=waves, idempotency_key=idempotency_key
        ),
    )
    finish(client, job, f"{len(job.agents)} agents to {arguments['environment']}", wait, timeout, as_json)


def finish(
    client: OrgdeckClient, job: DeploymentJob, what: str, wait: bool, timeout: float, as_json: bool
) -> None:
    """Say a job started; with `wait`, follow it and exit by how it ended (2 when it outlasts `timeout`)."""
    started = f"Started job {job.id}: {escape(what)}"
    if not wait:
        if as_json:
            print_json(job)
        else:
            out().print(started)
            out().print(f"[dim]Follow it with: orgdeck jobs show {job.id}[/]")
        return
    err().print(started)
    finished = follow(client, job, timeout)
    if finished is None:
        fail(
            f"Timed out after {timeout:g} s; job {job.id} goes on: orgdeck jobs show {job.id}",
            EXIT_USAGE,
            "timed_out",
        )
    if as_json:
        print_json(finished)
    else:
        print_job(finished)
    raise click.exceptions.Exit(EXIT_OK if finished.status == "complete" else EXIT_FAILURE)


@group.command(
    epilog="""\b
Examples:
  orgdeck deploy rollback production support-bot --wait
  orgdeck deploy rollback production support-bot --to 3 --wait --json
"""
)
@click.argument("environment", metavar="ENV")
@click.argument("agent", metavar="AGENT")
@click.option(
    "--to", "version", type=click.IntRange(1), metavar="N", help="This version [default: the previous one]."
)
@wait_options
@json_option
@with_client
def rollback(
    client: OrgdeckClient,
    environment: str,
    agent: str,
    version: int | None,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Deploy to ENV the version of AGENT it ran before the one it runs now (or --to N)."""
    target = resolve_environment(client, environment)
    client.agents.get(agent)  # an unknown agent is a not-found, before its history is read
    number = version or previous_version(client, target.id, agent)
    job = client.deployments.deploy(target.id, [agent], agent_versions={agent: number})
    finish(client, job, f"{agent} back to version {number} in {target.name}", wait, timeout, as_json)


@click.command(
    epilog="""\b
Examples:
  orgdeck promote staging production --wait
  orgdeck promote staging production support-bot triage --wait --timeout 900 --json
  orgdeck promote staging production --strategy waveSize=25%,pauseSeconds=300,onFailure=rollback --wait
"""
)
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.argument("agents", nargs=-1, metavar="[AGENT]...")
@strategy_option
@wait_options
@json_option
@with_client
def promote(
    client: OrgdeckClient,
    source: str,
    target: str,
    agents: tuple[str, ...],
    strategy: str | None,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Deploy to TO exactly what runs complete in FROM (names or ids): every agent running there, or
    AGENT… (stable keys), each at the version and with the config it runs with there. Exit codes as
    for `deploy`."""
    waves = parse_strategy(strategy)
    source_id, target_id = (resolve_environment(client, name).id for name in (source, target))
    job = with_known_agents(
        client,
        agents,
        lambda: client.deployments.promote(source_id, target_id, list(agents) or None, strategy=waves),
    )
    finish(client, job, f"{len(job.agents)} agents from {source} to {target}", wait, timeout, as_json)


def previous_version(client: OrgdeckClient, environment_id: str, agent: str) -> int:
    """The version that ran in the environment before the one deployed last, from its history."""
    history = client.deployments.history(agent=agent, environment_id=environment_id, limit=1000)
    deployed = [entry.version for entry in history.items if entry.status == "complete"]
    earlier = [number for number in deployed if number != deployed[0]]
    if not earlier:
        fail(
            f"Nothing to roll back to: {agent} has run one version here at most (give --to N)",
            EXIT_FAILURE,
            "no_previous_version",
        )
    return earlier[0]


def follow(client: OrgdeckClient, job: DeploymentJob, timeout: float) -> DeploymentJob | None:
    """Poll the job until it ends (None on timeout), showing its progress on stderr."""
    console = err()
    deadline = time.monotonic() + timeout
    last = ""
    polls = 0
    with console.status("", spinner="dots") if console.is_terminal else nullcontext() as spinner:
        while job.status not in FINISHED_JOB_STATUSES:
            if time.monotonic() >= deadline:
                return None
            time.sleep(
                min(POLL_SECONDS[min(polls, len(POLL_SECONDS) - 1)], max(0.0, deadline - time.monotonic()))
            )
            polls += 1
            job = client.deployments.job(job.id)
            progress = _progress(job)
            if spinner is not None:
                spinner.update(progress)
            elif progress != last:
                console.print(progress, soft_wrap=True)
            last = progress
    return job


def _progress(job: DeploymentJob) -> str:
    done = sum(agent.status != "pending" for agent in job.agents)
    waves = ""
    if job.rollout is not None:
        waves = f", wave {job.rollout.current_wave + 1} of {len(job.rollout.waves)}"
    return f"{job.id}: {job.status}{waves}, {done} of {len(job.agents)} agents done"


def print_job(job: DeploymentJob) -> None:
    console = out()
    colour = JOB_COLOURS.get(job.status, "white")
    took = ""
    if job.started_at and job.finished_at:
        took = f" in {(job.finished_at - job.started_at).total_seconds():.1f} s"
    console.print(f"Job {job.id} [{colour}]{job.status}[/]{took}, environment {job.environment_id}")
    if job.message:
        console.print(f"  {escape(job.message)}", soft_wrap=True)
    if job.rollout is not None:
        for wave in job.rollout.waves:
            verdict = f", verification {wave.verification.result}" if wave.verification else ""
            keys = escape(", ".join(wave.agent_stable_keys))
            console.print(f"  wave {wave.index + 1}: {wave.status}{verdict} ({keys})", soft_wrap=True)
    rows = table("AGENT", "VERSION", "STATUS", "ERROR")
    for agent in job.agents:
        status = f"[{JOB_COLOURS.get(agent.status, 'white')}]{agent.status}[/]"
        rows.add_row(escape(agent.stable_key), str(agent.version), status, escape(agent.error or ""))
    console.print(rows)


@click.group(
    epilog="\b\nExamples:\n  orgdeck jobs list --env production --status error,partial\n  orgdeck jobs show job_01j..."
)
def jobs() -> None:
    """Deployment jobs."""


@jobs.command(
    name="show",
    epilog="\b\nExamples:\n  orgdeck jobs show job_01j...\n  orgdeck jobs show job_01j... --json | jq -r .status",
)
@click.argument("job_id", metavar="ID")
@json_option
@with_client
def show_job(client: OrgdeckClient, job_id: str, as_json: bool) -> None:
    """One job with each agent's result."""
    job = client.deployments.job(job_id)
    if as_json:
        print_json(job)
    else:
        print_job(job)


@click.group(
    epilog="\b\nExamples:\n  orgdeck rollout pause job_01j...\n  orgdeck rollout resume job_01j... --json"
)
def rollout() -> None:
    """Pause, resume or abort a rollout (a job deploying in waves). Exit 0 done, 1 when the job is not
    in a state for it, 4 for an unknown job."""


def _transition(name: str, help_text: str) -> None:
    epilog = f"\b\nExamples:\n  orgdeck rollout {name} job_01j...\n  orgdeck rollout {name} job_01j... --json"

    @rollout.command(name=name, help=help_text, epilog=epilog)
    @click.argument("job_id", metavar="JOB")
    @json_option
    @with_client
    def command(client: OrgdeckClient, job_id: str, as_json: bool) -> None:
        job = getattr(client.deployments, name)(job_id)
        if as_json:
            print_json(job)
        else:
            print_job(job)


_transition("pause", "Hold the rollout before its next wave (the wave under way finishes).")
_transition("resume", "Continue a paused rollout at once.")
_transition("abort", "Start no further wave: the job ends aborted (what it deployed stays).")


@jobs.command(
    name="list",
    epilog="\b\nExamples:\n  orgdeck jobs list --env production --status error,partial\n  orgdeck jobs list --limit 5 --json",
)
@click.option("--env", "environment", metavar="ENV", help="Only jobs of this environment (name or id).")
@click.option("--status", metavar="S[,S…]", help=f"Only jobs in these states ({', '.join(JOB_STATUSES)}).")
@paged(default_limit=20)
@with_client
def list_jobs(
    client: OrgdeckClient,
    environment: str | None,
    status: str | None,
    limit: int,
    cursor: str | None,
    every: bool,
    as_json: bool,
) -> None:
    """Deployment jobs, newest first."""
    environment_id = resolve_environment(client, environment).id if environment else None
    statuses = [part.strip() for part in status.split(",")] if status else None
    fetch = by_cursor(
        lambda **page: client.deployments.jobs(environment_id=environment_id, status=statuses, **page)
    )
    page = collect(fetch, cursor=cursor, limit=limit, every=every)
    if as_json:
        print_json(page)
        return
    rows = table("JOB", "STATUS", "ENVIRONMENT", "AGENTS", "CREATED", "MESSAGE")
    for job in page.items:
        colour = JOB_COLOURS.get(job.status, "white")
        rows.add_row(
            job.id,
            f"[{colour}]{job.status}[/]",
            job.environment_id,
            escape(", ".join(agent.stable_key for agent in job.agents)),
            job.created_at.isoformat(timespec="seconds"),
            escape(job.message or ""),
        )
    out().print(rows)
    print_more(page)


@click.command(
    epilog="""\b
Examples:
  orgdeck status
  orgdeck status --env production --exit-code
  orgdeck status --json | jq '.items[] | select(.state == "drifted") | .stableKey'
"""
)
@click.option("--env", "environment", metavar="ENV", help="Only this environment (name or id).")
@click.option("--exit-code", is_flag=True, help="Exit 1 when any agent is drifted or in error.")
@json_option
@with_client
def status(client: OrgdeckClient, environment: str | None, exit_code: bool, as_json: bool) -> None:
    """Every agent in every environment: in sync, drifted, stale, in error or not deployed."""
    environment_id = resolve_environment(client, environment).id if environment else None
    matrix = whole_matrix(client, environment_id)
    if as_json:
        print_json(matrix)
    else:
        print_matrix(matrix)
    failing = exit_code and any(pair.state in FAILING_STATES for pair in matrix.items)
    raise click.exceptions.Exit(EXIT_FAILURE if failing else EXIT_OK)


def whole_matrix(client: OrgdeckClient, environment_id: str | None) -> StatusMatrix:
    """Every page of the status matrix (pages of agents, each with every environment), as one."""
    first = client.deployments.status(environment_id=environment_id, limit=1000)
    items = list(first.items)
    agents = {pair.stable_key for pair in items}
    while len(agents) < first.total_agents:
        page = client.deployments.status(environment_id=environment_id, limit=1000, offset=len(agents))
        if not page.items:
            break
        items += page.items
        agents |= {pair.stable_key for pair in page.items}
    return first.model_copy(update={"items": items, "limit": max(len(agents), 1), "offset": 0})


def print_matrix(matrix: StatusMatrix) -> None:
    environments = {environment.id: environment.name for environment in matrix.environments}
    rows = table("AGENT", *[escape(name) for name in environments.values()])
    cells: dict[str, dict[str, str]] = {}
    for pair in matrix.items:
        colour = STATE_COLOURS.get(pair.state, "white")
        version = f" v{pair.deployed_version}" if pair.deployed_version else ""
        newer = f"→v{pair.latest_version}" if pair.state == "stale" and pair.latest_version else ""
        cells.setdefault(pair.stable_key, {})[pair.environment_id] = (
            f"[{colour}]{pair.state}{version}{newer}[/]"
        )
    for agent, by_environment in cells.items():
        rows.add_row(escape(agent), *[by_environment.get(env_id, "") for env_id in environments])
    console = out()
    console.print(rows)
    counts = ", ".join(f"{matrix.counts.get(state, 0)} {state}" for state in AGENT_STATES)
    console.print(f"[dim]{counts} (pairs, whole organization)[/]")
    for pair in matrix.items:
        if pair.state in FAILING_STATES:
            reason = pair.error or ", ".join(change.field for change in pair.drift) or pair.state
            console.print(
                f"[{STATE_COLOURS[pair.state]}]{pair.state}[/] {escape(pair.stable_key)} in "
                f"{escape(environments.get(pair.environment_id, pair.environment_id))}: {escape(reason)}",
                soft_wrap=True,
            )
