"""Wire models of deployments (preview, jobs, per-agent results) and the client's `deployments` operations.

A deployment deploys each named agent's latest version (or the version `agentVersions` names, to
roll back) into one environment, with the body's overrides applied. What an agent runs with is its
*resolved config*: the version's provider, providerConfig merged with `agentProviderConfig`, the
model, its prompt references, the prompt pin (`promptName` + `version`) and the tool references.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, StringConstraints

from api.agents import PromptReferenceName, StableKey
from api.common import JsonObject, OrgScoped, Page, Record, Timestamp
from api.resource import Resource, body

JobStatus = Literal["pending", "running", "complete", "error", "partial"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
FINISHED_JOB_STATUSES = frozenset({"complete", "error", "partial"})
AgentResultStatus = Literal["pending", "complete", "error"]
AgentChangeStatus = Literal["added", "changed", "unchanged"]
ChangeKind = Literal["added", "removed", "changed"]

DEFAULT_JOB_PAGE_SIZE = 20
MAX_AGENTS_PER_DEPLOYMENT = 500
ENVIRONMENT_ID_MAX_LENGTH = 40

EnvironmentId = Annotated[str, StringConstraints(min_length=1, max_length=ENVIRONMENT_ID_MAX_LENGTH)]
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
    agent_versions: dict[StableKey, Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        description="Version to deploy per stableKey (e.g. to roll back); others get their latest.",
    )


class FleetDeploymentRequest(OrgScoped):
    environment_id: EnvironmentId


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


class DeploymentPreview(Record):
    environment_id: str
    has_changes: bool
    agents: list[AgentPreview]


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


class SigningKeyRequest(OrgScoped):
    environment_id: EnvironmentId


class SigningKey(Record):
    """The key webhook targets verify deployments with (Standard Webhooks); shown only here, once."""

    environment_id: str
    secret: str
    created_at: Timestamp


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
        org_slug: str | None = None,
    ) -> DeploymentJob:
        """Create a pending job; a worker runs it. Follow it with `job(id)`."""
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
        return DeploymentJob.model_validate(self._client.request("POST", "/agents/deployments", json=payload))

    def deploy_fleet(
        self, fleet_id: str, environment_id: str, *, org_slug: str | None = None
    ) -> DeploymentJob:
        """One job deploying every agent of the fleet."""
        payload = body(FleetDeploymentRequest, org_slug=self._org(org_slug), environment_id=environment_id)
        answer = self._client.request("POST", f"/fleets/{fleet_id}/deploy", json=payload)
        return DeploymentJob.model_validate(answer)

    def jobs(
        self,
        *,
        environment_id: str | None = None,
        status: list[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        org_slug: str | None = None,
    ) -> Page[DeploymentJob]:
        """Jobs, newest first; pass the page's `nextCursor` as `cursor` for the next page."""
        params = {
            "orgSlug": self._org(org_slug),
            "environmentId": environment_id,
            "status": ",".join(status) if status else None,
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
