"""Wire models of environments (deployment targets) and their encrypted secrets, and their client."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, StringConstraints, WithJsonSchema

from api.common import (
    DEFAULT_PAGE_SIZE,
    Description,
    OrgScoped,
    Page,
    PageLimit,
    PageOffset,
    Patch,
    Record,
    SecretField,
    Timestamp,
    WholeNumber,
)
from api.deployments import EnvironmentId, JobStatus
from api.resource import Resource, body
from api.transport import Transport

# Lowercase letters, digits and hyphens, starting with a letter or digit (e.g. `eu-production`).
ENVIRONMENT_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
# Upper snake case, as environment variables are named (e.g. `OPENAI_API_KEY`).
SECRET_NAME_PATTERN = r"^[A-Z][A-Z0-9_]{0,127}$"  # noqa: S105 - a pattern, not a password
SECRET_VALUE_MAX_BYTES = 64 * 1024
WEBHOOK_URL_MAX_LENGTH = 2000
MAX_SOAK_MINUTES = 60 * 24 * 30  # a month

EnvironmentName = Annotated[str, StringConstraints(pattern=ENVIRONMENT_NAME_PATTERN)]
SecretName = Annotated[str, StringConstraints(pattern=SECRET_NAME_PATTERN)]
Target = Literal["builtin", "webhook"]
Search = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError("must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials (user:password@); the service signs what it sends")
    return value


def _secret_value(value: str) -> str:
    # The message never quotes the value: it is a secret even when it is invalid.
    if not value:
        raise ValueError("must not be empty")
    if len(value.encode()) > SECRET_VALUE_MAX_BYTES:
        raise ValueError(f"must be at most {SECRET_VALUE_MAX_BYTES} bytes in UTF-8")
    return value


# The schemas carry the rules the validators enforce, for generated clients; the validators keep
# messages in words.
WebhookUrl = Annotated[
    str,
    StringConstraints(max_length=WEBHOOK_URL_MAX_LENGTH),
    AfterValidator(_http_url),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": WEBHOOK_URL_MAX_LENGTH,
            "pattern": r"^https?://[^\s/@]+(?:[/?#]\S*)?$",
        }
    ),
]
SecretValue = Annotated[
    str,
    AfterValidator(_secret_value),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": SECRET_VALUE_MAX_BYTES}),
]


class CreateEnvironment(OrgScoped):
    name: EnvironmentName
    description: Description = ""
    target: Target = Field("builtin", description="`builtin` records deployments; `webhook` POSTs them.")
    webhook_url: WebhookUrl | None = Field(None, description="Required with target `webhook`, else absent.")


class EnvironmentFields(OrgScoped):
    """An environment's own fields, as an operator changes them: only the fields sent change;
    switching the target to `builtin` forgets the webhook URL."""

    name: Patch[EnvironmentName] = None
    description: Patch[Description] = None
    target: Patch[Target] = None
    webhook_url: Patch[WebhookUrl] = None
    verification_webhook_url: WebhookUrl | None = Field(
        None,
        description="Called after each wave of every deployment here to pass or fail it (null: none); "
        "needs admin.",
    )


class UpdateEnvironment(EnvironmentFields):
    """Only the fields sent change; switching the target to `builtin` forgets the webhook URL. On a
    protected environment, name, target and webhookUrl change only through a change request."""

    protected: Patch[bool] = Field(
        None,
        description="Deployments here, and changes to where they go and what they carry, need approved "
        "change requests; changing it needs admin.",
    )
    required_approvals: Patch[WholeNumber(1, 5)] = Field(
        None, description="Approvals a change request here needs (1-5); changing it needs admin."
    )
    promotes_from: EnvironmentId | None = Field(
        None,
        description="The environment this one promotes from (its id; null: none); no cycles. Needs admin.",
    )
    require_promotion: Patch[bool] = Field(
        None,
        description="A deployment here must have run complete in promotesFrom first; needs admin.",
    )
    soak_minutes: Patch[WholeNumber(0, MAX_SOAK_MINUTES)] = Field(
        None,
        description="With requirePromotion: how long it must have run there, with no failed job since; "
        "needs admin.",
    )
    production: Patch[bool] = Field(
        None, description="Counts as production for lead time for changes; needs admin."
    )


class ListEnvironments(OrgScoped):
    target: Target | None = None
    search: Search | None = Field(None, description="Part of the name or description, any case.")
    limit: PageLimit = DEFAULT_PAGE_SIZE
    offset: PageOffset = 0


class LastDeployment(Record):
    """The newest deployment job of an environment, whatever its status."""

    id: str
    status: JobStatus
    created_at: Timestamp
    finished_at: Timestamp | None = None


class Environment(Record):
    id: str
    name: str
    description: str
    target: Target
    webhook_url: str | None = None
    verification_webhook_url: str | None = Field(
        None, description="Called after each wave of a deployment here to pass or fail it."
    )
    protected: bool = Field(
        False,
        description="Deployments here, and changes to where they go and what they carry, go through "
        "change requests.",
    )
    required_approvals: int = Field(1, description="Approvals a change request here needs.")
    promotes_from: str | None = Field(None, description="The environment this one promotes from, if any.")
    require_promotion: bool = Field(
        False, description="Deployments here must have run complete in promotesFrom first."
    )
    soak_minutes: int = Field(0, description="How long they must have run there with no failed job since.")
    production: bool = Field(False, description="Counts as production for lead time for changes.")
    secret_count: int = Field(description="Secrets scoped to this environment (org-wide ones not counted).")
    last_deployment: LastDeployment | None = Field(None, description="Its newest job; null before any.")
    signing_key_created_at: Timestamp | None = Field(
        None, description="When its webhook signing key was made; null while it has none."
    )
    created_at: Timestamp
    updated_at: Timestamp


class SetSecret(OrgScoped):
    """Create a secret, or rotate it: a name that exists in the scope gets the new value as a new version."""

    name: SecretName
    value: SecretValue = SecretField()
    environment_id: str | None = Field(None, description="The environment it belongs to; absent: org-wide.")


class Secret(Record):
    """A secret as every answer shows it: never its value."""

    id: str
    name: str
    environment_id: str | None = Field(description="Null for an organization-wide secret.")
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class SecretsResource(Resource):
    def set(
        self, name: str, value: str, *, environment_id: str | None = None, org_slug: str | None = None
    ) -> Secret:
        """Store a secret (org-wide unless `environment_id`); an existing name gets a new version."""
        payload = body(
            SetSecret, org_slug=self._org(org_slug), name=name, value=value, environment_id=environment_id
        )
        return Secret.model_validate(self._client.request("POST", "/environments/secrets", json=payload))

    def list(
        self,
        *,
        environment_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[Secret]:
        params = {
            "orgSlug": self._org(org_slug),
            "environmentId": environment_id,
            "limit": limit,
            "offset": offset,
        }
        return Page[Secret].model_validate(
            self._client.request("GET", "/environments/secrets", params=params)
        )

    def delete(self, secret_id: str, *, org_slug: str | None = None) -> Secret:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/environments/secrets/{secret_id}", params=params)
        return Secret.model_validate(answer)


class EnvironmentsResource(Resource):
    def __init__(self, client: Transport) -> None:
        super().__init__(client)
        self.secrets = SecretsResource(client)

    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        target: str | None = None,
        webhook_url: str | None = None,
        org_slug: str | None = None,
    ) -> Environment:
        payload = body(
            CreateEnvironment,
            org_slug=self._org(org_slug),
            name=name,
            description=description,
            target=target,
            webhook_url=webhook_url,
        )
        return Environment.model_validate(self._client.request("POST", "/environments", json=payload))

    def list(
        self,
        *,
        target: str | None = None,
        search: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[Environment]:
        payload = body(
            ListEnvironments,
            org_slug=self._org(org_slug),
            target=target,
            search=search,
            limit=limit,
            offset=offset,
        )
        answer = self._client.request("POST", "/environments/list", json=payload)
        return Page[Environment].model_validate(answer)

    def get(self, environment_id: str, *, org_slug: str | None = None) -> Environment:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", f"/environments/{environment_id}", params=params)
        return Environment.model_validate(answer)

    def update(
        self,
        environment_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        target: str | None = None,
        webhook_url: str | None = None,
        verification_webhook_url: str | None = None,
        protected: bool | None = None,
        required_approvals: int | None = None,
        promotes_from: str | None = None,
        require_promotion: bool | None = None,
        soak_minutes: int | None = None,
        production: bool | None = None,
        org_slug: str | None = None,
    ) -> Environment:
        """Fields left None keep their value (`promotes_from=""` clears the promotion path,
        `verification_webhook_url=""` the verification webhook)."""
        payload = body(
            UpdateEnvironment,
            org_slug=self._org(org_slug),
            name=name,
            description=description,
            target=target,
            webhook_url=webhook_url,
            verification_webhook_url=verification_webhook_url,
            protected=protected,
            required_approvals=required_approvals,
            promotes_from=promotes_from,
            require_promotion=require_promotion,
            soak_minutes=soak_minutes,
            production=production,
        )
        if promotes_from == "":
            payload["promotesFrom"] = None
        if verification_webhook_url == "":
            payload["verificationWebhookUrl"] = None
        answer = self._client.request("PATCH", f"/environments/{environment_id}", json=payload)
        return Environment.model_validate(answer)

    def delete(self, environment_id: str, *, org_slug: str | None = None) -> Environment:
        """Delete an environment and every secret scoped to it."""
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/environments/{environment_id}", params=params)
        return Environment.model_validate(answer)
