"""The status of every agent in every environment, kept per pair and never computed from jobs.

A pair gets a row in `deployment_states` when a job for it ends; without one it is `not_deployed`.
The row is evaluated again in the transaction of whatever it depends on changing (a job ending, the
draft edited, a version made, a referenced tool's deployment recorded, the org's threshold set),
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

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    Subquery,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from api.deployments import (
    AGENT_STATES,
    DEFAULT_STALE_AFTER_DAYS,
    AgentStatus,
    EnvironmentRef,
    FieldChange,
    StatusMatrix,
)
from service.agents.models import AgentRow, AgentVersionRow
from service.db import Database, dialect_name, insert_unless_taken, utcnow
from service.deployments.models import (
    AgentDeploymentRow,
    DeploymentJobRow,
    DeploymentPolicyRow,
    DeploymentStateRow,
)
from service.deployments.service import _mapping_changes, _value_changes
from service.environments.models import EnvironmentRow
from service.events.service import record_event
from service.orgs.models import OrganizationRow
from service.registries.models import RegistryArtifactRow, RegistryArtifactVersionRow, RegistryRow
from service.responses import splice_json
from service.settings import Settings
from service.tools.models import ToolDeploymentRow

# Pairs evaluated per query round (and per worker round): bounded work, bounded IN lists.
BATCH = 200
PROMPT_RECHECK = timedelta(hours=1)
# A prompt reference `<orgSlug>/<registry>/<artifact>[@label-or-version]`; others are not followed.
PROMPT_REFERENCE = re.compile(r"^(?P<org>[^/\s]+)/(?P<registry>[^/\s]+)/(?P<artifact>[^/@\s]+)(?:@\S*)?$")
ANNOUNCED_STATES = frozenset({"drifted", "stale"})
ANNOUNCED_FIELDS = ("stableKey", "environmentId", "deployedVersion", "latestVersion", "since")

PromptKey = tuple[str, str, str]


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
    agent_ids = sorted(row.agent_id for row in job.agent_rows)
    locked = select(DeploymentStateRow).where(
        DeploymentStateRow.environment_id == job.environment_id, DeploymentStateRow.agent_id.in_(agent_ids)
    )
    rows = {row.agent_id: row for row in session.scalars(_locked_in_order(locked))}
    deployed_refs = {ref for r in job.agent_rows if r.error is None for ref in r.config.get("toolRefs") or []}
    hashes = _tool_hashes(session, environment_ids={job.environment_id}, tool_keys=deployed_refs)
    for result in job.agent_rows:
        row = rows.get(result.agent_id) or _new_state(session, job=job, agent_id=result.agent_id)
        rows[result.agent_id] = row
        row.last_job_id = job.id
        row.error = result.error
        if result.error is None:
            refs = result.config.get("toolRefs") or []
            row.tool_hashes = {ref: hashes.get((job.environment_id, ref)) for ref in refs}
    _evaluate(session, list(rows.values()), utcnow())


def refresh_agent(session: Session, *, agent_id: str) -> None:
    """Re-evaluate an agent's pairs: its draft changed or a version was made."""
    _refresh(session, DeploymentStateRow.agent_id == agent_id)


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
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        if session.scalar(select(DeploymentStateRow.agent_id).where(due).limit(1)) is None:
            return False
    with db.session(write=True) as session:
        query = select(DeploymentStateRow).where(due).order_by(DeploymentStateRow.check_at).limit(BATCH)
        rows = list(session.scalars(query.with_for_update(skip_locked=True)))
        _evaluate(session, rows, now)
        return bool(rows)


def status_matrix(
    session: Session,
    *,
    org_id: str,
    environment_id: str | None,
    stable_key: str | None,
    states: Sequence[str],
    limit: int,
    offset: int,
) -> str:
    """A page of agents (by stableKey) by every environment (by name), as JSON text (a `StatusMatrix`).

    A page is 50 agents by every environment by default: each deployed pair's cell is the text its
    last evaluation stored, and the answer is put together as text, never as thousands of models.
    """
    statements = _matrix_statements(
        dialect_name(session),
        by_environment=environment_id is not None,
        by_agent=stable_key is not None,
        states=tuple(states),
    )
    values: dict[str, Any] = {
        "org_id": org_id,
        "environment_id": environment_id,
        "stable_key": stable_key,
        "limit": limit,
        "offset": offset,
    }
    environments = session.execute(statements.environments, values).all()
    values["environments"] = len(environments)
    total, agents, all_environments, stale_after_days = session.execute(statements.head, values).one()
    stored = dict(session.execute(statements.counts, values).all())
    counts = dict.fromkeys(AGENT_STATES, 0) | stored
    counts["not_deployed"] = agents * all_environments - sum(stored.values())
    cells = session.scalar(statements.cells, values)
    head = StatusMatrix(
        stale_after_days=stale_after_days or DEFAULT_STALE_AFTER_DAYS,
        environments=[EnvironmentRef(id=env_id, name=name) for env_id, name in environments],
        items=[],
        counts=counts,
        limit=limit,
        offset=offset,
        total_agents=total,
    )
    return splice_json(head, items=f"[{cells or ''}]")


def forget_agent(session: Session, *, agent_id: str) -> None:
    """An archived agent leaves the matrix and its counts: its pairs are no longer watched."""
    session.execute(delete(DeploymentStateRow).where(DeploymentStateRow.agent_id == agent_id))


# -- evaluation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Version:
    created_at: datetime
    content_hash: str
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class _PromptVersion:
    number: int
    version: str
    created_at: datetime


@dataclass(frozen=True)
class _Prompt:
    org_id: str
    public: bool
    versions: list[_PromptVersion]  # by number


@dataclass
class _Facts:
    """Everything the evaluation of a batch of pairs reads, loaded in a few queries."""

    agents: dict[str, AgentRow] = field(default_factory=dict)
    deployed: dict[tuple[str, str], AgentDeploymentRow] = field(default_factory=dict)
    # By (agent_id, number): each pair's running version, the one after it, and the agent's newest.
    versions: dict[tuple[str, int], _Version] = field(default_factory=dict)
    tool_hashes: dict[tuple[str, str], str] = field(default_factory=dict)
    prompts: dict[PromptKey, _Prompt] = field(default_factory=dict)
    stale_after_days: dict[str, int] = field(default_factory=dict)
    environment_names: dict[str, str] = field(default_factory=dict)


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
    facts = _load_facts(session, rows)
    for row in rows:
        _apply(session, row, facts, now)
    session.flush()


@dataclass(frozen=True)
class _Judgement:
    state: str
    drift: list[FieldChange]
    newer: list[FieldChange]
    stale_at: datetime | None
    watches_prompts: bool


def _apply(session: Session, row: DeploymentStateRow, facts: _Facts, now: datetime) -> None:
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
    facts: _Facts,
    now: datetime,
) -> _Judgement:
    """The pair's state by the precedence above, with what differs, what is newer and when it goes stale."""
    drift: list[FieldChange] = []
    newer: list[FieldChange] = []
    waiting_since = None
    watches_prompts = False
    if deployed is not None:
        drift = _draft_drift(agent, deployed, facts) + _tool_drift(row, deployed, facts)
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


def _announce(session: Session, row: DeploymentStateRow, status: AgentStatus, facts: _Facts) -> None:
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


def _draft_drift(agent: AgentRow, deployed: AgentDeploymentRow, facts: _Facts) -> list[FieldChange]:
    """How the draft differs from the running version, when the draft holds edits no version has."""
    newest = facts.versions.get((agent.id, agent.latest_version or 0))
    running = facts.versions.get((agent.id, deployed.version))
    if running is None or (newest is not None and newest.content_hash == agent.draft_hash):
        return []
    running_config, draft = running.snapshot, agent.draft.model_dump(mode="json", by_alias=True)
    changes = [
        *_value_changes("name", running_config.get("name"), draft["name"]),
        *_value_changes("provider", running_config.get("provider"), draft["provider"]),
        *_mapping_changes(
            "providerConfig", running_config.get("providerConfig") or {}, draft["providerConfig"]
        ),
        *_mapping_changes(
            "promptReferences", running_config.get("promptReferences") or {}, draft["promptReferences"]
        ),
    ]
    return [change.model_copy(update={"field": f"draft.{change.field}"}) for change in changes]


def _tool_drift(row: DeploymentStateRow, deployed: AgentDeploymentRow, facts: _Facts) -> list[FieldChange]:
    """Referenced tools whose deployed hash in the environment moved since the agent was deployed."""
    changes = []
    for key in deployed.config.get("toolRefs") or []:
        current = facts.tool_hashes.get((row.environment_id, key))
        if key not in row.tool_hashes:
            # A row from before baselines were kept: the first hash seen becomes the baseline.
            row.tool_hashes = {**row.tool_hashes, key: current}
            continue
        changes += _value_changes(f"tools.{key}", row.tool_hashes[key], current)
    return changes


def _newer(
    agent: AgentRow, deployed: AgentDeploymentRow, facts: _Facts, *, org_id: str
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
        prompt = _readable_prompt(facts, references.get(name), org_id=org_id)
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


def _prompt_key(reference: str | None) -> PromptKey | None:
    match = PROMPT_REFERENCE.match(reference or "")
    return (match["org"], match["registry"], match["artifact"]) if match else None


def _readable_prompt(facts: _Facts, reference: str | None, *, org_id: str) -> _Prompt | None:
    """The referenced artifact, if the org may read it (its own registry, or a public one)."""
    key = _prompt_key(reference)
    prompt = facts.prompts.get(key) if key else None
    if prompt is None or not (prompt.public or prompt.org_id == org_id):
        return None
    return prompt


def _load_facts(session: Session, rows: list[DeploymentStateRow]) -> _Facts:
    agent_ids = {row.agent_id for row in rows}
    environment_ids = {row.environment_id for row in rows}
    facts = _Facts()
    facts.agents = {
        agent.id: agent for agent in session.scalars(select(AgentRow).where(AgentRow.id.in_(agent_ids)))
    }
    wanted = {(row.agent_id, row.environment_id) for row in rows}
    candidates = session.scalars(
        select(AgentDeploymentRow).where(
            AgentDeploymentRow.agent_id.in_(agent_ids), AgentDeploymentRow.environment_id.in_(environment_ids)
        )
    )
    facts.deployed = {
        (d.agent_id, d.environment_id): d for d in candidates if (d.agent_id, d.environment_id) in wanted
    }
    facts.versions = _versions(session, facts.deployed.values(), facts.agents.values())
    tool_keys = {key for d in facts.deployed.values() for key in d.config.get("toolRefs") or []}
    facts.tool_hashes = _tool_hashes(session, environment_ids=environment_ids, tool_keys=tool_keys)
    facts.prompts = _prompts(session, facts.deployed.values())
    org_ids = {row.org_id for row in rows}
    facts.stale_after_days = dict(
        session.execute(
            select(DeploymentPolicyRow.org_id, DeploymentPolicyRow.stale_after_days).where(
                DeploymentPolicyRow.org_id.in_(org_ids)
            )
        ).all()
    )
    facts.environment_names = dict(
        session.execute(
            select(EnvironmentRow.id, EnvironmentRow.name).where(EnvironmentRow.id.in_(environment_ids))
        ).all()
    )
    return facts


def _versions(
    session: Session, deployed: Iterable[AgentDeploymentRow], agents: Iterable[AgentRow]
) -> dict[tuple[str, int], _Version]:
    """Each pair's running version, the one after it (the wait for it began then), each agent's newest.

    The newest is read here rather than through `Agent.newest`, which a session that has just made
    a version may still hold from before.
    """
    wanted = {(d.agent_id, n) for d in deployed for n in (d.version, d.version + 1)}
    wanted |= {(agent.id, agent.latest_version) for agent in agents if agent.latest_version}
    if not wanted:
        return {}
    query = select(
        AgentVersionRow.agent_id,
        AgentVersionRow.number,
        AgentVersionRow.created_at,
        AgentVersionRow.content_hash,
        AgentVersionRow.snapshot,
    ).where(
        AgentVersionRow.agent_id.in_({agent_id for agent_id, _ in wanted}),
        AgentVersionRow.number.in_({number for _, number in wanted}),
    )
    return {
        (agent_id, number): _Version(created_at, digest, snapshot)
        for agent_id, number, created_at, digest, snapshot in session.execute(query)
        if (agent_id, number) in wanted
    }


def _tool_hashes(
    session: Session, *, environment_ids: set[str], tool_keys: set[str]
) -> dict[tuple[str, str], str]:
    if not tool_keys:
        return {}
    query = select(
        ToolDeploymentRow.environment_id, ToolDeploymentRow.tool_key, ToolDeploymentRow.hash
    ).where(ToolDeploymentRow.environment_id.in_(environment_ids), ToolDeploymentRow.tool_key.in_(tool_keys))
    return {(env_id, key): digest for env_id, key, digest in session.execute(query)}


def _prompts(session: Session, deployed: Iterable[AgentDeploymentRow]) -> dict[PromptKey, _Prompt]:
    """The versions of every prompt artifact a running config pins (live registries only)."""
    keys = set()
    for d in deployed:
        references = d.config.get("promptReferences") or {}
        keys |= {_prompt_key(references.get(name)) for name in d.config.get("promptPins") or {}}
    keys.discard(None)
    if not keys:
        return {}
    artifacts = session.execute(
        select(
            RegistryArtifactRow.id,
            OrganizationRow.slug,
            RegistryRow.name,
            RegistryArtifactRow.name,
            RegistryRow.org_id,
            RegistryRow.visibility,
        )
        .join(RegistryRow, RegistryRow.id == RegistryArtifactRow.registry_id)
        .join(OrganizationRow, OrganizationRow.id == RegistryRow.org_id)
        .where(
            RegistryRow.deleted_at.is_(None),
            OrganizationRow.slug.in_({key[0] for key in keys}),
            RegistryRow.name.in_({key[1] for key in keys}),
            RegistryArtifactRow.name.in_({key[2] for key in keys}),
        )
    ).all()
    found = {row[0]: row for row in artifacts if (row[1], row[2], row[3]) in keys}
    versions: dict[str, list[_PromptVersion]] = {artifact_id: [] for artifact_id in found}
    if found:
        query = (
            select(
                RegistryArtifactVersionRow.artifact_id,
                RegistryArtifactVersionRow.number,
                RegistryArtifactVersionRow.version,
                RegistryArtifactVersionRow.created_at,
            )
            .where(RegistryArtifactVersionRow.artifact_id.in_(found))
            .order_by(RegistryArtifactVersionRow.number)
        )
        for artifact_id, number, version, created_at in session.execute(query):
            versions[artifact_id].append(_PromptVersion(number, version, created_at))
    return {
        (slug, registry, name): _Prompt(
            org_id=owner, public=visibility == "public", versions=versions[artifact_id]
        )
        for artifact_id, slug, registry, name, owner, visibility in found.values()
    }


# -- reads --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _MatrixStatements:
    """The reads of one shape of status page, over the parameters org_id, environment_id,
    stable_key, limit, offset and environments (how many the page has)."""

    environments: Select[Any]
    head: Select[Any]  # agents matching, active agents, environments, stale threshold
    counts: Select[Any]  # stored pairs per state over the org
    cells: Select[Any]


@functools.cache
def _matrix_statements(
    dialect: str, *, by_environment: bool, by_agent: bool, states: tuple[str, ...]
) -> _MatrixStatements:
    """Built once per shape: building and keying these statements cost more than running them."""
    org_id = bindparam("org_id")
    environments = select(EnvironmentRow.id, EnvironmentRow.name).where(EnvironmentRow.org_id == org_id)
    if by_environment:
        environments = environments.where(EnvironmentRow.id == bindparam("environment_id"))
    active = [AgentRow.org_id == org_id, AgentRow.archived_at.is_(None)]
    matching = list(active)
    if by_agent:
        matching.append(AgentRow.stable_key == bindparam("stable_key"))
    if states:
        matching.append(_has_pair_in(states, by_environment=by_environment))

    def count(model: Any, *conditions: ColumnElement[bool]) -> Any:
        return select(func.count(model.id)).where(*conditions).scalar_subquery()

    threshold = select(DeploymentPolicyRow.stale_after_days).where(DeploymentPolicyRow.org_id == org_id)
    head = select(
        count(AgentRow, *matching),
        count(AgentRow, *active),
        count(EnvironmentRow, EnvironmentRow.org_id == org_id),
        threshold.scalar_subquery(),
    )
    # Read from the (org_id, state) index alone: archived agents' rows are gone (forget_agent).
    counts = (
        select(DeploymentStateRow.state, func.count())
        .where(DeploymentStateRow.org_id == org_id)
        .group_by(DeploymentStateRow.state)
    )
    page = (
        select(AgentRow.id, AgentRow.stable_key, AgentRow.name, AgentRow.latest_version)
        .where(*matching)
        .order_by(AgentRow.stable_key)
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("offset", type_=Integer))
        .subquery("page")
    )
    cells = _cells_statement(dialect, page, environments.subquery("envs"), states)
    return _MatrixStatements(environments.order_by(EnvironmentRow.name), head, counts, cells)


def _has_pair_in(states: Sequence[str], *, by_environment: bool) -> ColumnElement[bool]:
    """Agents with at least one pair (in the environment, if one is named) in one of `states`."""
    in_scope = [DeploymentStateRow.agent_id == AgentRow.id]
    if by_environment:
        in_scope.append(DeploymentStateRow.environment_id == bindparam("environment_id"))
    options: list[ColumnElement[bool]] = []
    stored = [state for state in states if state != "not_deployed"]
    if stored:
        options.append(exists().where(*in_scope, DeploymentStateRow.state.in_(stored)))
    if "not_deployed" in states:
        # Fewer rows than environments: some pair has none. Rows of deleted environments go with them.
        deployed = select(func.count()).select_from(DeploymentStateRow).where(*in_scope).scalar_subquery()
        options.append(deployed < bindparam("environments", type_=Integer))
    return or_(*options)


def _cells_statement(dialect: str, page: Subquery, envs: Subquery, states: Sequence[str]) -> Select[Any]:
    """The page's cells (AgentStatus JSON), agent by agent and environment by environment, joined
    into one text by the database: a deployed pair's cell is the text its last evaluation stored, any
    other is made here. A thousand cells cost a tenth as much as reading them into Python one by one."""
    postgres = dialect == "postgresql"
    pairs = page.join(envs, true()).outerjoin(
        DeploymentStateRow,
        and_(DeploymentStateRow.agent_id == page.c.id, DeploymentStateRow.environment_id == envs.c.id),
    )
    order = (page.c.stable_key, envs.c.name)
    wanted = [func.coalesce(DeploymentStateRow.state, "not_deployed").in_(states)] if states else []
    if postgres:
        cell = _cell(dialect, DeploymentStateRow.__table__, page.c, envs.c.id)
        joined = func.string_agg(cell, aggregate_order_by(literal(","), *order))
        return select(joined).select_from(pairs).where(*wanted)
    # SQLite sorts the pairs by their keys alone, then reads each stored cell by rowid in that order
    # (it aggregates the rows of an ordered subquery in order): sorting the cells themselves, a few
    # hundred bytes each, would cost a third of the query.
    columns = (page.c.stable_key, page.c.name, page.c.latest_version, envs.c.id.label("environment_id"))
    rowid = literal_column(f"{DeploymentStateRow.__tablename__}.rowid").label("pair")
    ordered = select(*columns, rowid).select_from(pairs).where(*wanted).order_by(*order).subquery()
    stored = DeploymentStateRow.__table__.alias("stored")
    cell = _cell(dialect, stored, ordered.c, ordered.c.environment_id)
    read = ordered.outerjoin(stored, literal_column("stored.rowid") == ordered.c.pair)
    return select(func.group_concat(cell, ",")).select_from(read)


def _cell(dialect: str, pair: Any, agent: Any, environment_id: ColumnElement[str]) -> ColumnElement[str]:
    """A pair's cell: the text its last evaluation stored in `pair` (a deployment_states table), or
    one made from what the page knows (`agent`: stable_key, name, latest_version) for a pair without
    one. Every field of AgentStatus, in its order; what is not known is null."""
    postgres = dialect == "postgresql"
    empty_list = literal_column("'[]'::json" if postgres else "json('[]')")
    known = {
        "stable_key": agent.stable_key,
        "agent_name": agent.name,
        "environment_id": environment_id,
        "state": func.coalesce(pair.c.state, "not_deployed"),
        "latest_version": agent.latest_version,
        "drift": empty_list,
        "newer": empty_list,
    }
    fields = {info.alias: known.get(name, null()) for name, info in AgentStatus.model_fields.items()}
    made = (func.json_build_object if postgres else func.json_object)(
        *(part for name, value in fields.items() for part in (literal(name), value))
    )
    # A pair the upgrade added but the worker has not evaluated yet has no cell text.
    return func.coalesce(func.nullif(pair.c.cell, ""), cast(made, Text))
