"""Wire models of LLM provider connections and the system models the operator offers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from api.common import Name, OrgScoped, Page, Patch, Record, Timestamp
from api.resource import Resource, body

ProviderKind = Literal["openai", "anthropic", "azure_openai", "openai_compatible"]
PROVIDER_KINDS: tuple[str, ...] = ProviderKind.__args__
# The kinds whose address is the connection's own and so must be given.
KINDS_NEEDING_BASE_URL = frozenset({"azure_openai", "openai_compatible"})

BaseUrl = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
ModelName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
ApiVersion = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
# Write-only; the fields holding it are kept out of reprs so that a logged request never shows it.
ProviderApiKey = Annotated[str, StringConstraints(min_length=1, max_length=4000)]
MAX_MODELS = 100


class CreateProvider(OrgScoped):
    name: Name
    kind: ProviderKind
    base_url: BaseUrl | None = Field(
        None,
        description="Required for azure_openai (https://NAME.openai.azure.com) and openai_compatible "
        "(up to and including /v1, e.g. http://127.0.0.1:11434/v1). Defaults: "
        "https://api.openai.com/v1 and https://api.anthropic.com.",
    )
    api_version: ApiVersion | None = Field(None, description="azure_openai only; default 2024-10-21.")
    api_key: ProviderApiKey | None = Field(
        None, repr=False, description="Write-only; stored encrypted. Optional for openai_compatible."
    )
    models: list[ModelName] = Field(default_factory=list, max_length=MAX_MODELS)
    default_model: ModelName | None = Field(
        None, description="Used when a request names no model; default: the first of `models`."
    )


class UpdateProvider(OrgScoped):
    """Fields present are changed, others kept; `apiKey: null` removes the stored key."""

    name: Patch[Name] = None
    base_url: Patch[BaseUrl] = None
    api_version: Patch[ApiVersion] = None
    api_key: ProviderApiKey | None = Field(None, repr=False)
    models: Patch[Annotated[list[ModelName], Field(max_length=MAX_MODELS)]] = None
    default_model: Patch[ModelName] = None


class ProviderTestRequest(OrgScoped):
    model_id: ModelName | None = Field(None, description="Default: the connection's default model.")


class Provider(Record):
    """A connection as every answer shows it: whether a key is set and its last 4 characters, never more."""

    id: str
    name: str
    kind: ProviderKind
    base_url: str
    api_version: str | None = None
    models: list[str]
    default_model: str | None = None
    api_key_set: bool
    api_key_last4: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class ProviderTestResult(Record):
    """The outcome of one real, minimal call; a failure is an outcome here, not an error answer."""

    ok: bool
    latency_ms: int
    model: str | None = None
    message: str
    code: str | None = Field(None, description="Why it failed, e.g. provider_auth_failed; null when ok.")


class SystemModel(Record):
    """A drafting model every organization may use: the built-in drafter or one the operator configured."""

    key: str
    kind: str
    model: str
    base_url: str | None = None
    builtin: bool
    default: bool
    available: bool
    description: str


class ProvidersResource(Resource):
    def create(
        self,
        name: str,
        kind: str,
        *,
        base_url: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        models: list[str] | None = None,
        default_model: str | None = None,
        org_slug: str | None = None,
    ) -> Provider:
        payload = body(
            CreateProvider,
            org_slug=self._org(org_slug),
            name=name,
            kind=kind,
            base_url=base_url,
            api_version=api_version,
            api_key=api_key,
            models=models,
            default_model=default_model,
        )
        return Provider.model_validate(self._client.request("POST", "/providers", json=payload))

    def list(self, *, org_slug: str | None = None) -> Page[Provider]:
        answer = self._client.request("GET", "/providers", params={"orgSlug": self._org(org_slug)})
        return Page[Provider].model_validate(answer)

    def get(self, provider_id: str, *, org_slug: str | None = None) -> Provider:
        params = {"orgSlug": self._org(org_slug)}
        return Provider.model_validate(
            self._client.request("GET", f"/providers/{provider_id}", params=params)
        )

    def update(
        self, provider_id: str, *, remove_api_key: bool = False, org_slug: str | None = None, **changes: Any
    ) -> Provider:
        """Change the given fields (name, base_url, api_version, api_key, models, default_model)."""
        payload = body(UpdateProvider, org_slug=self._org(org_slug), **changes)
        if remove_api_key:
            payload["apiKey"] = None
        answer = self._client.request("PATCH", f"/providers/{provider_id}", json=payload)
        return Provider.model_validate(answer)

    def delete(self, provider_id: str, *, org_slug: str | None = None) -> Provider:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/providers/{provider_id}", params=params)
        return Provider.model_validate(answer)

    def test(
        self, provider_id: str, *, model_id: str | None = None, org_slug: str | None = None
    ) -> ProviderTestResult:
        payload = body(ProviderTestRequest, org_slug=self._org(org_slug), model_id=model_id)
        answer = self._client.request("POST", f"/providers/{provider_id}/test", json=payload)
        return ProviderTestResult.model_validate(answer)

    def system_models(self) -> Page[SystemModel]:
        return Page[SystemModel].model_validate(self._client.request("GET", "/providers/system"))
