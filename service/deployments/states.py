"""The status of every agent in every environment, kept per pair and never computed from jobs.

A pair gets a row in `deployment_states` when a job for it ends; without one it is `not_deployed`.
The row is evaluated again in the transaction of whatever it depends on changing (a job ending, the
draft edited, a version made, a referenced tool's deployment recorded: the hooks of the agents and
tools attached here; the org's threshold set),
and by the worker when its `check_at` comes: a stale deadline passing, or the hourly look at pinned
prompts (publishing to a registry does not reach back to the pairs that pin it). The states, in the
order they win when several hold:

- `error`: the pair's last deployment failed (what was asked for did not land).
- `drifted`: the draft holds edits that neither run there nor are a version yet, or a tool the
  running config references has another deployed hash there than when it was deployed.
- `stale`: a newer agent version, or a newer version of a pinned prompt, has waited longer than
  the org's threshold; the wait starts when it appeared, or at the deployment if that was later.
- `in_sync`: none of these (a newer version may be waiting, within the threshold).

Entering `drifted` or `stale` records `agent.drifted` / `agent.stale`, once per entry. Drift is
reported, never repaired: redeploying is the operator's call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, select
from sqlalchemy.orm import Session

from api.deployments import DEFAULT_STALE_AFTER_DAYS, AgentStatus, FieldChange
from service.agents import service as agents
from service.agents.models import AgentRow
from service.deployments import service as deployments
from service.deployments.diffs import mapping_changes, value_changes
from service.deployments.facts import Facts, deployed_tool_hashes, load_facts, readable_prompt
from service.deployments.models import (
    AgentDeploymentRow,
    DeploymentJobRow,
    DeploymentPolicyRow,
    DeploymentStateRow,
)
from service.environments.models import EnvironmentRow
from service.events.service import record_event
from service.settings import Settings
from service.storage.db import Database, insert_unless_taken, utcnow
from service.tools import service as tools

# Pairs evaluated per query round (and per worker round): bounded work, bounded IN lists.
BATCH = 200
PROMPT_RECHECK = timedelta(hours=1)
ANNOUNCED_STATES = frozenset({"drifted", "stale"})
ANNOUNCED_FIELDS = ("stableKey", "environmentId", "deployedVersion", "latestVersion", "since")


def get_stale_after_days(session: Session, *, org_id: str) -> int:
    days = session.scalar(
        select(DeploymentPolicyRow.stale_after_days).where(DeploymentPolicyRow.org_id == org_id)
    )
    return days or DEFAULT_STALE_AFTER_DAYS


def update_settings(session: Session, *, org_id: str, stale_after_days: int) -> int:
    """Set the org's stale threshold and re-evaluate its pairs under it, in this transaction."""
    policy = session.get(DeploymentPolicyRow, org_id, with_for_update=True)
    if policy is None:
        created = DeploymentPolicyRow(org_id=org_id, stale_after_days=stale_after_days)
        if insert_unless_taken(session, created):
            policy = created
        else:
            policy = session.get(DeploymentPolicyRow, org_id, with_for_update=True)
    assert policy is not None
    policy.stale_after_days = stale_after_days
    session.flush()
    refresh_org(session, org_id=org_id)
    return stale_after_days


def refresh_org(session: Session, *, org_id: str) -> None:
    """Re-evaluate every pair of the org (its threshold changed, or rows were written without evaluation,
    e.g. by a bulk load)."""
    _refresh(session, DeploymentStateRow.org_id == org_id)


def record_job_outcome(session: Session, *, job: DeploymentJobRow) -> None:
    """After a job ended: each pair takes its agent's result, a failure or a new baseline, then is evaluated."""
    # Agents never sent (waves a rollout did not reach) keep their state.
    sent = [row for row in job.agent_rows if row.status != "pending"]
    agent_ids = sorted(row.agent_id for row in sent)
    locked = select(DeploymentStateRow).where(
        DeploymentStateRow.environment_id == job.environment_id, DeploymentStateRow.agent_id.in_(agent_ids)
    )
    rows = {row.agent_id: row for row in session.scalars(_locked_in_order(locked))}
    deployed_refs = {ref for r in sent if r.error is None for ref in r.running_config.get("toolRefs") or []}
    hashes = deployed_tool_hashes(session, environment_ids={job.environment_id}, tool_keys=deployed_refs)
    for result in sent:
        row = rows.get(result.agent_id) or _new_state(session, job=job, agent_id=result.agent_id)
        rows[result.agent_id] = row
        row.last_job_id = job.id
        row.error = result.error
        if result.error is None:
            refs = result.running_config.get("toolRefs") or []
            row.tool_hashes = {ref: hashes.get((job.environment_id, ref)) for ref in refs}
    _evaluate(session, list(rows.values()), utcnow())


@agents.draft_changed.attach
def refresh_agent(session: Session, *, agent_id: str) -> None:
    """Re-evaluate an agent's pairs: its draft changed or a version was made."""
    _refresh(session, DeploymentStateRow.agent_id == agent_id)


@tools.record_moved.attach
def refresh_tool(session: Session, *, environment_id: str, tool_key: str) -> None:
    """Re-evaluate the pairs of an environment whose running config references a tool whose record changed."""
    configs = session.execute(
        select(AgentDeploymentRow.agent_id, AgentDeploymentRow.config).where(
            AgentDeploymentRow.environment_id == environment_id
        )
    )
    referencing = [agent_id for agent_id, config in configs if tool_key in (config.get("toolRefs") or [])]
    if referencing:
        _refresh(
            session,
            DeploymentStateRow.environment_id == environment_id,
            DeploymentStateRow.agent_id.in_(referencing),
        )


def check_due_states(db: Database, settings: Settings) -> bool:
    """Worker task: evaluate up to BATCH pairs whose check time has come; True when there were some."""
    now = utcnow()
    due = DeploymentStateRow.check_at <= now
    first = select(DeploymentStateRow.org_id).where(due).order_by(DeploymentStateRow.check_at).limit(1)
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        org_id = session.scalar(first)
    if org_id is None:
        return False
    # One org per round: the org's status version, moved as the transaction commits, is then the
    # only one it moves, and two workers never wait on each other's versions (migration 0023).
    with db.session(write=True) as session:
        query = (
            select(DeploymentStateRow)
            .where(due, DeploymentStateRow.org_id == org_id)
            .order_by(DeploymentStateRow.check_at)
            .limit(BATCH)
        )
        rows = list(session.scalars(query.with_for_update(skip_locked=True)))
        _evaluate(session, rows, now)
        return bool(rows)


@agents.agent_archived.attach
def forget_agent(session: Session, *, agent_id: str) -> None:
    """An archived agent leaves the matrix and its counts: its pairs are no longer watched."""
    session.execute(delete(DeploymentStateRow).where(DeploymentStateRow.agent_id == agent_id))


# -- evaluation ---------------------------------------------------------------------------------


def _refresh(session: Session, *conditions: ColumnElement[bool]) -> None:
    """Lock the matching rows (always in key order, so that writers queue rather than deadlock), evaluate."""
    rows = list(session.scalars(_locked_in_order(select(DeploymentStateRow).where(*conditions))))
    now = utcnow()
    for start in range(0, len(rows), BATCH):
        _evaluate(session, rows[start : start + BATCH], now)


def _locked_in_order(query: Select[tuple[DeploymentStateRow]]) -> Select[tuple[DeploymentStateRow]]:
    return query.order_by(DeploymentStateRow.agent_id, DeploymentStateRow.environment_id).with_for_update()


def _new_state(session: Session, *, job: DeploymentJobRow, agent_id: str) -> DeploymentStateRow:
    row = DeploymentStateRow(
        agent_id=agent_id,
        environment_id=job.environment_id,
        org_id=job.org_id,
        state="not_deployed",
        since=utcnow(),
        tool_hashes={},
        cell="",
    )
    if insert_unless_taken(session, row):
        return row
    # Another job for the same pair ended meanwhile and created it: take that row.
    taken = session.scalar(
        select(DeploymentStateRow)
        .where(
            DeploymentStateRow.agent_id == agent_id, DeploymentStateRow.environment_id == job.environment_id
        )
        .with_for_update()
    )
    assert taken is not None
    return taken


def _evaluate(session: Session, rows: list[DeploymentStateRow], now: datetime) -> None:
    if not rows:
        return
    facts = load_facts(session, rows)
    facts.policy_bundle_hashes = _policy_bundle_hashes(session, facts)
    for row in rows:
        _apply(session, row, facts, now)
    session.flush()


def _policy_bundle_hashes(session: Session, facts: Facts) -> dict[tuple[str, str], str]:
    """By pair: the hash of the policies that apply to it now, for each environment of the batch."""
    hashes = {}
    for environment_id in {environment_id for _, environment_id in facts.deployed}:
        environment = session.get(EnvironmentRow, environment_id)
        agents = [facts.agents[a] for a, e in facts.deployed if e == environment_id and a in facts.agents]
        if environment is None or not agents:
            continue
        bundles = deployments.policy_bundles(
            session, org_id=environment.org_id, environment=environment, agents=agents
        )
        hashes |= {(agent_id, environment_id): deployments.bundle_hash(b) for agent_id, b in bundles.items()}
    return hashes


@dataclass(frozen=True)
class _Judgement:
    state: str
    drift: list[FieldChange]
    newer: list[FieldChange]
    stale_at: datetime | None
    watches_prompts: bool


def _apply(session: Session, row: DeploymentStateRow, facts: Facts, now: datetime) -> None:
    """Bring one row up to date (state, cell, next check); record the event of entering drifted or stale."""
    agent = facts.agents.get(row.agent_id)
    if agent is None or agent.archived_at is not None:
        session.delete(row)  # archived (e.g. while a job deploying it ran): no longer watched
        return
    deployed = facts.deployed.get((row.agent_id, row.environment_id))
    judged = _judge(row, agent, deployed, facts, now)
    upcoming = [judged.stale_at] if judged.stale_at is not None and judged.stale_at > now else []
    if judged.watches_prompts and judged.state != "stale":
        upcoming.append(now + PROMPT_RECHECK)
    _set_if_changed(row, "check_at", min(upcoming) if upcoming else None)
    entered = judged.state != row.state
    if entered:
        row.state = judged.state
        row.since = now
    status = AgentStatus(
        stable_key=agent.stable_key,
        agent_name=agent.name,
        environment_id=row.environment_id,
        state=row.state,
        deployed_version=deployed.version if deployed else None,
        latest_version=agent.latest_version,
        deployed_at=deployed.deployed_at if deployed else None,
        last_job_id=row.last_job_id,
        since=row.since,
        drift=judged.drift,
        newer=judged.newer,
        error=row.error,
    )
    _set_if_changed(row, "cell", status.model_dump_json())
    if entered and row.state in ANNOUNCED_STATES:
        _announce(session, row, status, facts)


def _judge(
    row: DeploymentStateRow,
    agent: AgentRow,
    deployed: AgentDeploymentRow | None,
    facts: Facts,
    now: datetime,
) -> _Judgement:
    """The pair's state by the precedence above, with what differs, what is newer and when it goes stale."""
    drift: list[FieldChange] = []
    newer: list[FieldChange] = []
    waiting_since = None
    watches_prompts = False
    if deployed is not None:
        drift = [
            *_draft_drift(agent, deployed, facts),
            *_tool_drift(row, deployed, facts),
            *value_changes(
                "policyBundleHash",
                deployed.config.get("policyBundleHash"),
                facts.policy_bundle_hashes.get((agent.id, deployed.environment_id)),
            ),
        ]
        newer, waiting_since, watches_prompts = _newer(agent, deployed, facts, org_id=row.org_id)
    days = facts.stale_after_days.get(row.org_id, DEFAULT_STALE_AFTER_DAYS)
    stale_at = waiting_since + timedelta(days=days) if waiting_since is not None else None
    if row.error is not None:
        state = "error"
    elif drift:
        state = "drifted"
    elif stale_at is not None and stale_at <= now:
        state = "stale"
    else:
        state = "in_sync"
    return _Judgement(state, drift, newer, stale_at, watches_prompts)


def _set_if_changed(row: DeploymentStateRow, attribute: str, value: Any) -> None:
    # Assigning an equal value would still write the row; most evaluations change nothing.
    if getattr(row, attribute) != value:
        setattr(row, attribute, value)


def _announce(session: Session, row: DeploymentStateRow, status: AgentStatus, facts: Facts) -> None:
    """The event of entering drifted or stale: the pair, its versions, and what differs or is newer."""
    shown = status.model_dump(mode="json")
    payload = {key: shown[key] for key in ANNOUNCED_FIELDS}
    payload |= {
        "environmentName": facts.environment_names.get(row.environment_id),
        "jobId": facts.deployed[(row.agent_id, row.environment_id)].job_id,
    }
    if row.state == "drifted":
        payload["drift"] = shown["drift"]
    else:
        days = facts.stale_after_days.get(row.org_id, DEFAULT_STALE_AFTER_DAYS)
        payload |= {"newer": shown["newer"], "staleAfterDays": days}
    record_event(session, org_id=row.org_id, type=f"agent.{row.state}", payload=payload)


def _draft_drift(agent: AgentRow, deployed: AgentDeploymentRow, facts: Facts) -> list[FieldChange]:
    """How the draft differs from the running version, when the draft holds edits no version has."""
    newest = facts.versions.get((agent.id, agent.latest_version or 0))
    running = facts.versions.get((agent.id, deployed.version))
    if running is None or (newest is not None and newest.content_hash == agent.draft_hash):
        return []
    running_config, draft = running.snapshot, agent.draft.model_dump(mode="json", by_alias=True)
    changes = [
        *value_changes("name", running_config.get("name"), draft["name"]),
        *value_changes("provider", running_config.get("provider"), draft["provider"]),
        *mapping_changes(
            "providerConfig", running_config.get("providerConfig") or {}, draft["providerConfig"]
        ),
        *mapping_changes(
            "promptReferences", running_config.get("promptReferences") or {}, draft["promptReferences"]
        ),
    ]
    return [change.model_copy(update={"field": f"draft.{change.field}"}) for change in changes]


def _tool_drift(row: DeploymentStateRow, deployed: AgentDeploymentRow, facts: Facts) -> list[FieldChange]:
    """Referenced tools whose deployed hash in the environment moved since the agent was deployed."""
    changes = []
    for key in deployed.config.get("toolRefs") or []:
        current = facts.tool_hashes.get((row.environment_id, key))
        if key not in row.tool_hashes:
            # A row from before baselines were kept: the first hash seen becomes the baseline.
            row.tool_hashes = {**row.tool_hashes, key: current}
            continue
        changes += value_changes(f"tools.{key}", row.tool_hashes[key], current)
    return changes


def _newer(
    agent: AgentRow, deployed: AgentDeploymentRow, facts: Facts, *, org_id: str
) -> tuple[list[FieldChange], datetime | None, bool]:
    """What is newer than what runs, since when the oldest of it has waited, and whether prompts are pinned."""
    newer: list[FieldChange] = []
    waits: list[datetime] = []
    latest = agent.latest_version or 0
    if latest > deployed.version:
        newer.append(FieldChange(field="version", kind="changed", before=deployed.version, after=latest))
        following = facts.versions.get((agent.id, deployed.version + 1))
        waits.append(max(following.created_at, deployed.deployed_at) if following else deployed.deployed_at)
    watches_prompts = False
    references = deployed.config.get("promptReferences") or {}
    for name, pinned in sorted((deployed.config.get("promptPins") or {}).items()):
        prompt = readable_prompt(facts.prompts, references.get(name), org_id=org_id)
        if prompt is None:
            continue
        watches_prompts = True
        position = next((i for i, v in enumerate(prompt.versions) if v.version == pinned), None)
        if position is None or position == len(prompt.versions) - 1:
            continue
        latest_prompt = prompt.versions[-1].version
        newer.append(
            FieldChange(field=f"promptPins.{name}", kind="changed", before=pinned, after=latest_prompt)
        )
        waits.append(max(prompt.versions[position + 1].created_at, deployed.deployed_at))
    return newer, min(waits) if waits else None, watches_prompts
