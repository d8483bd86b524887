"""Wire models of deployments (preview, jobs, per-agent results) and the client's `deployments` operations.

A deployment deploys each named agent's latest version (or the version `agentVersions` names, to
roll back) into one environment, with the body's overrides applied. What an agent runs with is its
*resolved config*: the version's provider, providerConfig merged with `agentProviderConfig`, the
model, its prompt references, the prompt pin (`promptName` + `version`) and the tool references.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, PlainValidator, StringConstraints, WithJsonSchema

from api.agents import PromptReferenceName, StableKey
from api.approvals import ChangeRequestRef
from api.common import JsonObject, OrgScoped, Page, Record, Request, Timestamp, WholeNumber
from api.constants import IDEMPOTENCY_HEADER
from api.governance import Violation
from api.resource import Resource, body

JobStatus = Literal["pending", "running", "paused", "complete", "error", "partial", "aborted", "rolled_back"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
FINISHED_JOB_STATUSES = frozenset({"complete", "error", "partial", "aborted", "rolled_back"})
# The ends that count as a failed deployment (change failure rate, incidents). An aborted job is
# an operator's stop, not a failure of what it deployed.
FAILED_JOB_STATUSES = ("error", "partial", "rolled_back")
# What a running rollout may be moved to, from which statuses (POST /agents/deployment-jobs/{jobId}/…).
PAUSABLE_JOB_STATUSES = ("pending", "running")
ABORTABLE_JOB_STATUSES = ("pending", "running", "paused")
OnFailure = Literal["stop", "rollback"]
WaveStatus = Literal["pending", "running", "verifying", "complete", "failed", "rolled_back", "skipped"]
VerificationResult = Literal["pass", "fail"]
MAX_PAUSE_SECONDS = 86400
AgentResultStatus = Literal["pending", "complete", "error"]
AgentChangeStatus = Literal["added", "changed", "unchanged"]
ChangeKind = Literal["added", "removed", "changed"]

AgentState = Literal["in_sync", "drifted", "stale", "error", "not_deployed"]
AGENT_STATES: tuple[str, ...] = get_args(AgentState)
HeatmapGroupBy = Literal["environment", "agent", "weekday_hour"]
HeatmapBucket = Literal["day", "week"]
HeatmapMetric = Literal["count", "failures", "failure_rate"]
MetricsPeriod = Literal["day", "week", "month"]

DEFAULT_JOB_PAGE_SIZE = 20
DEFAULT_STALE_AFTER_DAYS = 7
DEFAULT_STATUS_PAGE_SIZE = 50
# Analytics cover at most two years per request; the default window is the last 90 days.
MAX_ANALYTICS_DAYS = 731
DEFAULT_ANALYTICS_DAYS = 90
MAX_AGENTS_PER_DEPLOYMENT = 500
ENVIRONMENT_ID_MAX_LENGTH = 40

EnvironmentId = Annotated[str, StringConstraints(min_length=1, max_length=ENVIRONMENT_ID_MAX_LENGTH)]
WAVE_PERCENT = re.compile(r"^(100|[1-9][0-9]?)%$")


def _wave_size(value: Any) -> int | str:
    """A count of agents (1..MAX_AGENTS_PER_DEPLOYMENT; 2.0 is 2) or a percent of them as "N%"
    (1..100): one error naming `waveSize`, whichever was meant."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_AGENTS_PER_DEPLOYMENT:
        return value
    if isinstance(value, str) and WAVE_PERCENT.match(value):
        return value
    raise ValueError(f'waveSize is a whole number 1..{MAX_AGENTS_PER_DEPLOYMENT} or a percent "1%".."100%"')


WaveSize = Annotated[
    int | str,
    PlainValidator(_wave_size),
    WithJsonSchema(
        {
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_AGENTS_PER_DEPLOYMENT},
                {"type": "string", "pattern": WAVE_PERCENT.pattern},
            ]
        }
    ),
]


class RolloutStrategy(Request):
    """How a deployment of many agents goes out: in waves of `waveSize` agents (a count, or `"N%"`
    of them rounded up, at least one), `pauseSeconds` apart, each verified by the environment's
    verification webhook if it has one; on a failed wave, `stop` leaves the later waves undeployed
    and `rollback` also puts the agents of the waves done back on what they ran before."""

    wave_size: WaveSize = Field(
        description='Agents per wave: a whole number, or a percent of them as "N%" (1..100, rounded up).'
    )
    pause_seconds: WholeNumber(0, MAX_PAUSE_SECONDS) = Field(0, description="Seconds between waves.")
    on_failure: OnFailure = Field("stop", description="What a failed wave does: stop, or roll back.")

    def wave_count(self, agents: int) -> int:
        """Agents per wave for a deployment of `agents` agents."""
        if isinstance(self.wave_size, int):
            return self.wave_size
        percent = int(self.wave_size.removesuffix("%"))
        return max(1, -(-agents * percent // 100))


class WaveVerification(Record):
    result: VerificationResult
    message: str | None = None


class RolloutWave(Record):
    index: int
    agent_stable_keys: list[str]
    status: WaveStatus = "pending"
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    verification: WaveVerification | None = None


class Rollout(Record):
    """A job's progress through its waves (`currentWave` counts from 0)."""

    strategy: RolloutStrategy
    waves: list[RolloutWave]
    current_wave: int = 0
    next_wave_at: Timestamp | None = Field(None, description="When the next wave may start (its pause).")
    paused_at: Timestamp | None = None
    paused_by: str | None = None


ArtifactVersion = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")]
ModelName = Annotated[str, StringConstraints(pattern=r"^\S{1,200}$")]
ToolRef = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class DeploymentRequest(OrgScoped):
    """What to deploy where. Overrides left out keep the version's own values."""

    environment_id: EnvironmentId
    agent_stable_keys: list[StableKey] = Field(min_length=1, max_length=MAX_AGENTS_PER_DEPLOYMENT)
    prompt_name: PromptReferenceName | None = Field(
        default=None, description="Pins this prompt to `version`; both or neither."
    )
    version: ArtifactVersion | None = Field(default=None, description="The pinned prompt's version.")
    model: ModelName | None = None
    tool_refs: list[ToolRef] | None = Field(default=None, max_length=100, description="Tool keys of the org.")
    agent_provider_config: JsonObject | None = Field(
        default=None, description="Merged over each version's providerConfig, key by key."
    )
    agent_versions: dict[StableKey, WholeNumber(1)] | None = Field(
        default=None,
        description="Version to deploy per stableKey (e.g. to roll back); others get their latest.",
    )
    promoted_from: EnvironmentId | None = Field(
        default=None,
        description="Deploy what runs complete in this environment: each agent's version, pinned "
        "prompt versions and config as they run there (no overrides beside it). Set by "
        "POST /agents/deployments/promote, and by the change requests it sends to review.",
    )
    strategy: RolloutStrategy | None = Field(None, description="Deploy in waves; absent: all at once.")


class PromotionRequest(OrgScoped):
    """Deploy to `to` exactly what runs complete in `from` (every agent running there, or those named)."""

    from_environment_id: EnvironmentId = Field(alias="from", description="The environment promoted from.")
    to: EnvironmentId = Field(description="The environment promoted to.")
    agent_stable_keys: list[StableKey] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_AGENTS_PER_DEPLOYMENT,
        description="Only these agents; absent: every agent running in `from`.",
    )
    strategy: RolloutStrategy | None = Field(None, description="Deploy in waves; absent: all at once.")


class FleetDeploymentRequest(OrgScoped):
    environment_id: EnvironmentId
    strategy: RolloutStrategy | None = Field(None, description="Deploy in waves; absent: all at once.")


class JobTransition(OrgScoped):
    """Pause, resume or abort a job (POST /agents/deployment-jobs/{jobId}/pause|resume|abort)."""


class FieldChange(Record):
    """One difference: `field` is `version`, `provider`, `model`, `toolRefs`, or a dotted key under
    `providerConfig.`, `promptReferences.` or `promptPins.`."""

    field: str
    kind: ChangeKind
    before: Any = None
    after: Any = None


class AgentPreview(Record):
    stable_key: str
    status: AgentChangeStatus
    current_version: int | None = Field(default=None, description="The version running there now, if any.")
    target_version: int
    changes: list[FieldChange]


class PreviewWarning(Record):
    """Something that would stop the deployment, such as `signing_key_missing` (a webhook
    environment that cannot sign the manifest yet)."""

    code: str
    message: str


class DeploymentPreview(Record):
    environment_id: str
    has_changes: bool
    agents: list[AgentPreview]
    warnings: list[PreviewWarning] = Field(
        default=[], description="Why deploying this would be refused; empty when it can go ahead."
    )
    violations: list[Violation] = Field(
        default=[],
        description="Policies the agents would break, each with its enforcement; a deny one without "
        "an exception refuses the deploy.",
    )


class AgentResult(Record):
    stable_key: str
    version: int
    status: AgentResultStatus
    error: str | None = None


class DeploymentJob(Record):
    id: str
    environment_id: str
    status: JobStatus
    message: str | None = None
    attempts: int = Field(description="How many times a worker has started the job.")
    created_at: Timestamp
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    lease_expires_at: Timestamp | None = None
    agents: list[AgentResult]
    change_request: ChangeRequestRef | None = Field(
        None, description="For a job an approved change request started: who asked and who approved."
    )
    violations: list[Violation] = Field(
        default=[],
        description="Policies its agents broke that it went ahead through: audit, warn, or deny under "
        "a live exception (exceptionId).",
    )
    rollout: Rollout | None = Field(None, description="Its waves, for a job with a strategy; else null.")


class SigningKeyRequest(OrgScoped):
    environment_id: EnvironmentId


class SigningKey(Record):
    """The key webhook targets verify deployments with (Standard Webhooks); shown only here, once."""

    environment_id: str
    secret: str
    created_at: Timestamp


class HistoryEntry(Record):
    """One agent's part in one job: what was deployed where, and how it went."""

    job_id: str
    stable_key: str
    environment_id: str
    environment_name: str
    version: int
    status: AgentResultStatus
    job_status: JobStatus
    error: str | None = None
    created_at: Timestamp
    finished_at: Timestamp | None = None


class EnvironmentRef(Record):
    id: str
    name: str


class AgentStatus(Record):
    """One (agent, environment) pair of the status matrix.

    `drift` lists what changed since the running version was deployed (`draft.<field>` for the
    agent's draft, `tools.<toolKey>` for a referenced tool's deployed hash); `since` is when the pair
    entered its current state.
    """

    stable_key: str
    agent_name: str
    environment_id: str
    state: AgentState
    deployed_version: int | None = None
    latest_version: int | None = None
    deployed_at: Timestamp | None = None
    last_job_id: str | None = None
    since: Timestamp | None = None
    drift: list[FieldChange] = []
    newer: list[FieldChange] = Field(
        default=[],
        description="What is newer than what runs: `version`, `promptPins.<name>` (whatever the state).",
    )
    error: str | None = None


class StatusMatrix(Record):
    """Every agent of the page by every environment, with the state counts over the whole org."""

    stale_after_days: int
    environments: list[EnvironmentRef]
    counts: dict[str, int] = Field(description="Pairs per state, over the whole org.")
    limit: int
    offset: int
    total_agents: int
    # Last: the service splices the cells, rendered by the database, in after the rest.
    items: list[AgentStatus]


class PromotionEnvironment(Record):
    """An environment on a promotion path, with the rules a promotion to it meets."""

    id: str
    name: str
    promotes_from: str | None = Field(description="The environment it promotes from; null for a root.")
    protected: bool = Field(description="A promotion here opens a change request for review.")
    required_approvals: int
    require_promotion: bool
    soak_minutes: int
    production: bool
    pending_change_request_ids: list[str] = Field(
        default=[], description="Open deployment change requests to it, oldest first."
    )


class RunningVersion(Record):
    """What runs complete of an agent in one environment, and since when."""

    environment_id: str
    version: int
    prompt_pins: dict[str, str] = Field(default={}, description="Prompt versions pinned, by prompt name.")
    since: Timestamp = Field(description="When the deployment now running there completed.")


class WaitingPromotion(Record):
    """A version running in `from` that `environmentId` (which promotes from it) does not run yet,
    and what holds its promotion back; no field but `blocks` set means it can go now."""

    environment_id: str
    from_environment_id: str = Field(alias="from")
    version: int
    soak_minutes_left: int | None = Field(None, description="With requirePromotion: soak still to run.")
    failed_since: Timestamp | None = Field(
        None, description="With requirePromotion: a job that failed for it in `from` since it began there."
    )
    blocks: list[str] = Field(
        default=[], description="What holds it back, in words (the promotion_required reasons)."
    )
    change_request_id: str | None = Field(
        None, description="An open change request deploying it there, waiting for review."
    )


class PromotionAgent(Record):
    stable_key: str
    agent_name: str
    running: list[RunningVersion] = Field(description="Per environment of the paths where it runs.")
    waiting: list[WaitingPromotion]


class PromotionView(Record):
    """The organization's promotion paths (environments in path order: each root, then what
    promotes from it, depth first) and a page of the agents running on them."""

    environments: list[PromotionEnvironment]
    items: list[PromotionAgent]
    limit: int
    offset: int
    total_agents: int = Field(description="Agents running in at least one environment of the paths.")


StaleAfterDays = WholeNumber(1, 365)


class DeploymentSettings(Record):
    stale_after_days: int = Field(ge=1, le=365)


class DeploymentSettingsUpdate(OrgScoped):
    stale_after_days: StaleAfterDays = Field(
        description="Days a newer version may wait undeployed before the pair is stale."
    )


class HeatmapAxisItem(Record):
    """A row or column: `id` is what cells refer to, `name` what a person reads."""

    id: str
    name: str


class Heatmap(Record):
    """A grid: `rows` and `columns` in display order, and three matrices with a list per row and a
    number per column: jobs (`counts`), failed jobs (`failures`) and the metric asked for
    (`values`; a failure rate is null where there are no jobs). Dense rather than a list of cells:
    a year of days by twenty environments is 7,300 cells, and each would repeat its row and column.

    environment: rows are environments, columns are bucket start dates. agent: rows are agents
    (stableKey), columns environments. weekday_hour: rows `Mon`..`Sun`, columns `00`..`23` (UTC).
    """

    group_by: HeatmapGroupBy
    bucket: HeatmapBucket
    metric: HeatmapMetric
    start: date
    end: date
    rows: list[HeatmapAxisItem]
    columns: list[HeatmapAxisItem]
    counts: list[list[int]]
    failures: list[list[int]]
    values: list[list[float | None]]


class MetricsFigures(Record):
    """The four delivery metrics over one stretch of time (None where there is nothing to measure)."""

    deployments: int = Field(description="Ended jobs: complete, error, partial, rolled_back or aborted.")
    successes: int = Field(description="Complete jobs.")
    failures: int = Field(description="Error, partial or rolled_back jobs (an aborted one is not a failure).")
    deployments_per_day: float | None = Field(
        description="Deployment frequency: successful jobs per elapsed day, from the first deployment "
        "(or the range's start, if later) to today (or the range's end, if earlier); null for a "
        "period that ended before the first deployment or has not begun."
    )
    change_failure_rate: float | None = None
    median_duration_seconds: float | None = None
    median_time_to_restore_seconds: float | None = None
    lead_time: float | None = Field(
        None,
        description="Lead time for changes: the median, in seconds, from an agent version's creation "
        "to its first complete deployment in a production environment (marked `production`, or the "
        "last on a promotion path), over the versions whose first arrival falls in the stretch; null "
        "without any (and for an environment that is not production).",
    )


class MetricsPoint(MetricsFigures):
    period_start: date


class EnvironmentMetrics(MetricsFigures):
    environment_id: str
    environment_name: str
    counted_from: date = Field(
        description="The first day its frequency counts: the range's start, or its first deployment if later."
    )
    periods: list[MetricsPoint]


class DeploymentMetrics(Record):
    """Totals, a trend per period, and the same per environment. Time to restore is per incident:
    from the end of the first failed (error, partial or rolled_back) job of a run to the end of the next
    complete job in that environment, counted on the day that failure was created. Medians are
    read from histograms and lie within 4.4 % (one bucket) of the exact ones."""

    period: MetricsPeriod
    start: date
    end: date
    counted_from: date = Field(
        description="The first day frequencies count: `start`, or the day of the first deployment "
        "if later, so that days before there was anything to deploy do not dilute them."
    )
    totals: MetricsFigures
    periods: list[MetricsPoint]
    environments: list[EnvironmentMetrics]


def _with_strategy(
    payload: dict[str, Any], strategy: RolloutStrategy | dict[str, Any] | None
) -> dict[str, Any]:
    """The body with its strategy: a RolloutStrategy in wire form, or a dict as given (in wire
    names), which the service checks like any field."""
    if strategy is None:
        return payload
    if isinstance(strategy, RolloutStrategy):
        return payload | {"strategy": strategy.model_dump(mode="json", by_alias=True, exclude_unset=True)}
    return payload | {"strategy": dict(strategy)}


class DeploymentsResource(Resource):
    def preview(
        self,
        environment_id: str,
        agent_stable_keys: list[str],
        *,
        prompt_name: str | None = None,
        version: str | None = None,
        model: str | None = None,
        tool_refs: list[str] | None = None,
        agent_provider_config: dict[str, Any] | None = None,
        agent_versions: dict[str, int] | None = None,
        org_slug: str | None = None,
    ) -> DeploymentPreview:
        """What deploying would change, agent by agent; executes nothing."""
        payload = body(
            DeploymentRequest,
            org_slug=self._org(org_slug),
            environment_id=environment_id,
            agent_stable_keys=agent_stable_keys,
            prompt_name=prompt_name,
            version=version,
            model=model,
            tool_refs=tool_refs,
            agent_provider_config=agent_provider_config,
            agent_versions=agent_versions,
        )
        answer = self._client.request("POST", "/agents/deployments/preview", json=payload)
        return DeploymentPreview.model_validate(answer)

    def deploy(
        self,
        environment_id: str,
        agent_stable_keys: list[str],
        *,
        prompt_name: str | None = None,
        version: str | None = None,
        model: str | None = None,
        tool_refs: list[str] | None = None,
        agent_provider_config: dict[str, Any] | None = None,
        agent_versions: dict[str, int] | None = None,
        strategy: RolloutStrategy | dict[str, Any] | None = None,
        org_slug: str | None = None,
        idempotency_key: str | None = None,
    ) -> DeploymentJob:
        """Create a pending job; a worker runs it. Follow it with `job(id)`.

        Calls with the same `idempotency_key` (e.g. a CI run's id) create one job between them, for a
        day; without one, each call gets its own key, so only this call's retries are deduplicated.
        """
        payload = body(
            DeploymentRequest,
            org_slug=self._org(org_slug),
            environment_id=environment_id,
            agent_stable_keys=agent_stable_keys,
            prompt_name=prompt_name,
            version=version,
            model=model,
            tool_refs=tool_refs,
            agent_provider_config=agent_provider_config,
            agent_versions=agent_versions,
        )
        payload = _with_strategy(payload, strategy)
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else None
        answer = self._client.request("POST", "/agents/deployments", json=payload, headers=headers)
        return DeploymentJob.model_validate(answer)

    def preview_promotion(
        self,
        from_environment_id: str,
        to_environment_id: str,
        agent_stable_keys: list[str] | None = None,
        *,
        org_slug: str | None = None,
    ) -> DeploymentPreview:
        """What promoting would change in the second environment; executes nothing."""
        payload = self._promotion(from_environment_id, to_environment_id, agent_stable_keys, org_slug, None)
        answer = self._client.request("POST", "/agents/deployments/promote/preview", json=payload)
        return DeploymentPreview.model_validate(answer)

    def promote(
        self,
        from_environment_id: str,
        to_environment_id: str,
        agent_stable_keys: list[str] | None = None,
        *,
        strategy: RolloutStrategy | dict[str, Any] | None = None,
        org_slug: str | None = None,
    ) -> DeploymentJob:
        """Deploy to the second environment exactly what runs complete in the first (every agent
        running there, or those named)."""
        payload = self._promotion(
            from_environment_id, to_environment_id, agent_stable_keys, org_slug, strategy
        )
        answer = self._client.request("POST", "/agents/deployments/promote", json=payload)
        return DeploymentJob.model_validate(answer)

    def _promotion(
        self,
        source: str,
        target: str,
        agent_stable_keys: list[str] | None,
        org_slug: str | None,
        strategy: RolloutStrategy | dict[str, Any] | None,
    ) -> dict[str, Any]:
        payload = body(
            PromotionRequest,
            org_slug=self._org(org_slug),
            from_environment_id=source,
            to=target,
            agent_stable_keys=agent_stable_keys,
        )
        return _with_strategy(payload, strategy)

    def promotions(
        self, *, limit: int | None = None, offset: int | None = None, org_slug: str | None = None
    ) -> PromotionView:
        """The promotion paths in order, what runs along them, and what waits to be promoted."""
        params = {"orgSlug": self._org(org_slug), "limit": limit, "offset": offset}
        answer = self._client.request("GET", "/agents/deployments/promotions", params=params)
        return PromotionView.model_validate(answer)

    def deploy_fleet(
        self,
        fleet_id: str,
        environment_id: str,
        *,
        strategy: RolloutStrategy | dict[str, Any] | None = None,
        org_slug: str | None = None,
    ) -> DeploymentJob:
        """One job deploying every agent of the fleet."""
        payload = body(FleetDeploymentRequest, org_slug=self._org(org_slug), environment_id=environment_id)
        payload = _with_strategy(payload, strategy)
        answer = self._client.request("POST", f"/fleets/{fleet_id}/deploy", json=payload)
        return DeploymentJob.model_validate(answer)

    def pause(self, job_id: str, *, org_slug: str | None = None) -> DeploymentJob:
        """Hold a rollout before its next wave (the wave under way finishes)."""
        return self._transition(job_id, "pause", org_slug)

    def resume(self, job_id: str, *, org_slug: str | None = None) -> DeploymentJob:
        """Continue a paused rollout at once (the rest of a pause between waves is skipped)."""
        return self._transition(job_id, "resume", org_slug)

    def abort(self, job_id: str, *, org_slug: str | None = None) -> DeploymentJob:
        """Start no further wave; the job ends `aborted` (what was deployed stays)."""
        return self._transition(job_id, "abort", org_slug)

    def _transition(self, job_id: str, action: str, org_slug: str | None) -> DeploymentJob:
        payload = body(JobTransition, org_slug=self._org(org_slug))
        answer = self._client.request("POST", f"/agents/deployment-jobs/{job_id}/{action}", json=payload)
        return DeploymentJob.model_validate(answer)

    def jobs(
        self,
        *,
        environment_id: str | None = None,
        status: list[str] | None = None,
        start: date | None = None,
        end: date | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        org_slug: str | None = None,
    ) -> Page[DeploymentJob]:
        """Jobs, newest first, created from `start` to `end` (inclusive UTC days) if given; pass the
        page's `nextCursor` as `cursor` for the next page."""
        params = {
            "orgSlug": self._org(org_slug),
            "environmentId": environment_id,
            "status": ",".join(status) if status else None,
            "start": start.isoformat() if start else None,
            "end": end.isoformat() if end else None,
            "limit": limit,
            "cursor": cursor,
        }
        answer = self._client.request("GET", "/agents/deployment-jobs", params=params)
        return Page[DeploymentJob].model_validate(answer)

    def job(self, job_id: str, *, org_slug: str | None = None) -> DeploymentJob:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", f"/agents/deployment-jobs/{job_id}", params=params)
        return DeploymentJob.model_validate(answer)

    def create_signing_key(self, environment_id: str, *, org_slug: str | None = None) -> SigningKey:
        """Create (or replace) the environment's webhook signing key; its value is shown only now."""
        payload = body(SigningKeyRequest, org_slug=self._org(org_slug), environment_id=environment_id)
        answer = self._client.request("POST", "/agents/deployments/signing-key", json=payload)
        return SigningKey.model_validate(answer)

    def history(
        self,
        *,
        agent: str | None = None,
        environment_id: str | None = None,
        status: list[str] | None = None,
        start: date | None = None,
        end: date | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[HistoryEntry]:
        """Per-agent deployment results, newest first; `start`/`end` are inclusive UTC days."""
        params = {
            "orgSlug": self._org(org_slug),
            "agent": agent,
            "environmentId": environment_id,
            "status": ",".join(status) if status else None,
            "start": start.isoformat() if start else None,
            "end": end.isoformat() if end else None,
            "limit": limit,
            "offset": offset,
        }
        answer = self._client.request("GET", "/agents/deployments/history", params=params)
        return Page[HistoryEntry].model_validate(answer)

    def status(
        self,
        *,
        environment_id: str | None = None,
        agent: str | None = None,
        state: list[str] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> StatusMatrix:
        """The agent-by-environment status matrix (agents paged by `limit`/`offset`)."""
        params = {
            "orgSlug": self._org(org_slug),
            "environmentId": environment_id,
            "agent": agent,
            "state": ",".join(state) if state else None,
            "limit": limit,
            "offset": offset,
        }
        answer = self._client.request("GET", "/agents/deployments/status", params=params)
        return StatusMatrix.model_validate(answer)

    def heatmap(
        self,
        *,
        group_by: str = "environment",
        bucket: str = "day",
        metric: str = "count",
        start: date | None = None,
        end: date | None = None,
        environment_id: str | None = None,
        org_slug: str | None = None,
    ) -> Heatmap:
        params = {
            "orgSlug": self._org(org_slug),
            "groupBy": group_by,
            "bucket": bucket,
            "metric": metric,
            "start": start.isoformat() if start else None,
            "end": end.isoformat() if end else None,
            "environmentId": environment_id,
        }
        answer = self._client.request("GET", "/agents/deployments/heatmap", params=params)
        return Heatmap.model_validate(answer)

    def metrics(
        self,
        *,
        period: str = "week",
        start: date | None = None,
        end: date | None = None,
        environment_id: str | None = None,
        org_slug: str | None = None,
    ) -> DeploymentMetrics:
        params = {
            "orgSlug": self._org(org_slug),
            "period": period,
            "start": start.isoformat() if start else None,
            "end": end.isoformat() if end else None,
            "environmentId": environment_id,
        }
        answer = self._client.request("GET", "/agents/deployments/metrics", params=params)
        return DeploymentMetrics.model_validate(answer)

    def settings(self, *, org_slug: str | None = None) -> DeploymentSettings:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", "/agents/deployments/settings", params=params)
        return DeploymentSettings.model_validate(answer)

    def update_settings(self, *, stale_after_days: int, org_slug: str | None = None) -> DeploymentSettings:
        payload = body(
            DeploymentSettingsUpdate, org_slug=self._org(org_slug), stale_after_days=stale_after_days
        )
        answer = self._client.request("PUT", "/agents/deployments/settings", json=payload)
        return DeploymentSettings.model_validate(answer)
