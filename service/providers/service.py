"""Provider connections: saved with their key encrypted, tested with a real call, used for drafting."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.governance import BUILTIN_DRAFTER_KEY
from api.providers import (
    KINDS_NEEDING_BASE_URL,
    CreateProvider,
    ProviderTestResult,
    SystemModel,
    UpdateProvider,
)
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.outbound.urls import OutboundRefused, check_outbound_url, check_url_syntax
from service.providers.adapters import (
    DEFAULT_AZURE_API_VERSION,
    DEFAULT_BASE_URLS,
    Completion,
    ModelEndpoint,
    ProviderFailed,
    complete,
)
from service.providers.models import ProviderConnectionRow
from service.providers.system_models import BUILTIN_DESCRIPTION, BUILTIN_KIND, configured_system_models
from service.settings import Settings
from service.storage.crypto import Cipher, reencrypt_column

# Only keys at least this long show their last 4 characters: on a short key they would give too much away.
MIN_KEY_LENGTH_FOR_HINT = 16
TEST_PROMPT = "Reply with the single word OK."
TEST_SYSTEM = "You are a connection check. Answer as briefly as possible."
TEST_MAX_TOKENS = 16


def create_provider(
    session: Session, *, org_id: str, request: CreateProvider, cipher: Cipher
) -> ProviderConnectionRow:
    _refuse_duplicate_name(session, org_id=org_id, name=request.name)
    if request.api_version is not None and request.kind != "azure_openai":
        raise InvalidInput("apiVersion applies to azure_openai connections only", field="apiVersion")
    record = ProviderConnectionRow(
        org_id=org_id,
        name=request.name,
        kind=request.kind,
        base_url=_base_url(request.kind, request.base_url),
        api_version=request.api_version or _default_api_version(request.kind),
    )
    record.models, record.default_model = _models(request.models, request.default_model)
    _set_api_key(record, request.api_key, cipher)
    session.add(record)
    session.flush()
    return record


def list_providers(session: Session, *, org_id: str) -> list[ProviderConnectionRow]:
    query = select(ProviderConnectionRow).where(ProviderConnectionRow.org_id == org_id)
    return list(session.scalars(query.order_by(ProviderConnectionRow.name, ProviderConnectionRow.id)))


def get_provider(session: Session, *, org_id: str, provider_id: str) -> ProviderConnectionRow:
    """The organization's connection; another organization's is not found, exactly like a missing one."""
    record = session.scalar(
        select(ProviderConnectionRow).where(
            ProviderConnectionRow.id == provider_id, ProviderConnectionRow.org_id == org_id
        )
    )
    if record is None:
        raise NotFound(f"No provider connection '{provider_id}' in this organization", field="providerId")
    return record


def update_provider(
    session: Session, *, org_id: str, provider_id: str, request: UpdateProvider, cipher: Cipher
) -> ProviderConnectionRow:
    record = get_provider(session, org_id=org_id, provider_id=provider_id)
    given = request.model_fields_set
    if request.name is not None and request.name != record.name:
        _refuse_duplicate_name(session, org_id=org_id, name=request.name)
        record.name = request.name
    if "base_url" in given:
        new_base_url = _base_url(record.kind, request.base_url)
        if record.api_key_set and "api_key" not in given and _host(new_base_url) != _host(record.base_url):
            raise InvalidInput(
                "Moving the connection to another host needs its API key again: a stored key is "
                "never sent to a host it was not given for",
                field="apiKey",
            )
        record.base_url = new_base_url
    if "api_version" in given:
        if record.kind != "azure_openai":
            raise InvalidInput("apiVersion applies to azure_openai connections only", field="apiVersion")
        record.api_version = request.api_version or DEFAULT_AZURE_API_VERSION
    if "models" in given or "default_model" in given:
        models = request.models if "models" in given else record.models
        default = request.default_model if "default_model" in given else record.default_model
        old_default_left = "default_model" not in given and default not in (request.models or [])
        if default is not None and "models" in given and old_default_left:
            default = None  # the old default left the list: fall back to the new list's first
        record.models, record.default_model = _models(models or [], default)
    if "api_key" in given:
        _set_api_key(record, request.api_key, cipher)
    session.flush()
    return record


def delete_provider(session: Session, *, org_id: str, provider_id: str) -> ProviderConnectionRow:
    record = get_provider(session, org_id=org_id, provider_id=provider_id)
    session.delete(record)
    session.flush()
    return record


def endpoint_for(
    session: Session, *, org_id: str, provider_id: str, model_id: str | None, cipher: Cipher
) -> ModelEndpoint:
    """What calling the connection needs, read now so that no transaction waits on the provider."""
    record = get_provider(session, org_id=org_id, provider_id=provider_id)
    model = model_id or record.default_model
    if model is None:
        raise InvalidInput(
            f"Provider '{record.name}' has no default model; name the model in modelId", field="modelId"
        )
    return ModelEndpoint(
        role="provider",
        name=record.name,
        kind=record.kind,
        base_url=record.base_url,
        model=model,
        api_key=cipher.decrypt(record.api_key_encrypted) if record.api_key_encrypted else None,
        api_version=record.api_version,
    )


def ask(
    endpoint: ModelEndpoint, *, settings: Settings, system: str, prompt: str, max_tokens: int
) -> Completion:
    """Call an organization's connection: the outbound rule first, then the model."""
    try:
        check_outbound_url(endpoint.base_url, settings)
    except OutboundRefused as refused:
        raise InvalidInput(
            f"{endpoint.label}: {refused}", field="baseUrl", code="outbound_refused"
        ) from refused
    return complete(
        endpoint,
        system=system,
        prompt=prompt,
        max_tokens=max_tokens,
        timeout=settings.provider_timeout_seconds,
    )


def system_model_endpoint(key: str, settings: Settings, *, also_known: tuple[str, ...] = ()) -> ModelEndpoint:
    """What calling the operator's system model `key` needs; 400 naming systemModelKey when there is no
    such model (the message lists `also_known` keys with the configured ones) or its key is not set."""
    entries = {entry.key: entry for entry in configured_system_models(settings)}
    entry = entries.get(key)
    if entry is None:
        known = ", ".join([*also_known, *entries]) or "none configured (ORGDECK_SYSTEM_MODELS)"
        raise InvalidInput(f"No system model '{key}'; the system models are: {known}", field="systemModelKey")
    if not entry.available:
        raise InvalidInput(
            f"System model '{key}' is not available: the operator has not set {entry.api_key_variable}",
            field="systemModelKey",
        )
    return entry.endpoint()


def ask_model(
    endpoint: ModelEndpoint,
    *,
    operator_configured: bool,
    settings: Settings,
    system: str,
    prompt: str,
    max_tokens: int,
) -> Completion:
    """Call a system model or an organization's connection: operator-configured system models are
    trusted, organizations' own URLs pass the outbound rule (`ask`)."""
    if operator_configured:
        return complete(
            endpoint,
            system=system,
            prompt=prompt,
            max_tokens=max_tokens,
            timeout=settings.provider_timeout_seconds,
        )
    return ask(endpoint, settings=settings, system=system, prompt=prompt, max_tokens=max_tokens)


def try_connection(endpoint: ModelEndpoint, *, settings: Settings) -> ProviderTestResult:
    """One real, minimal call; what went wrong is the result, not an error."""
    started = time.monotonic()
    try:
        answer = ask(
            endpoint, settings=settings, system=TEST_SYSTEM, prompt=TEST_PROMPT, max_tokens=TEST_MAX_TOKENS
        )
    except (ProviderFailed, InvalidInput) as failure:
        return ProviderTestResult(
            ok=False,
            latency_ms=round((time.monotonic() - started) * 1000),
            model=endpoint.model,
            message=failure.message,
            code=failure.code,
        )
    return ProviderTestResult(
        ok=True, latency_ms=answer.latency_ms, model=answer.model, message=answer.text.strip()[:500]
    )


def system_models(settings: Settings) -> list[SystemModel]:
    builtin = SystemModel(
        key=BUILTIN_DRAFTER_KEY,
        kind=BUILTIN_KIND,
        model=BUILTIN_DRAFTER_KEY,
        builtin=True,
        default=True,
        available=True,
        description=BUILTIN_DESCRIPTION,
    )
    configured = [
        SystemModel(
            key=entry.key,
            kind=entry.kind,
            model=entry.model,
            base_url=entry.base_url,
            builtin=False,
            default=False,
            available=entry.available,
            description=f"{entry.model} ({entry.kind}), configured by the operator"
            + ("" if entry.available else f"; unavailable until {entry.api_key_variable} is set"),
        )
        for entry in configured_system_models(settings)
    ]
    return [builtin, *configured]


def rotate_provider_keys(session: Session, cipher: Cipher) -> int:
    """Re-encrypt every stored provider key under the first configured key; how many were rewritten."""
    return reencrypt_column(session, cipher=cipher, column=ProviderConnectionRow.api_key_encrypted)


def _refuse_duplicate_name(session: Session, *, org_id: str, name: str) -> None:
    taken = session.scalar(
        select(ProviderConnectionRow.id).where(
            ProviderConnectionRow.org_id == org_id, ProviderConnectionRow.name == name
        )
    )
    if taken is not None:
        raise AlreadyExists(f"A provider connection named '{name}' already exists", field="name")


def _base_url(kind: str, given: str | None) -> str:
    if given is None:
        if kind in KINDS_NEEDING_BASE_URL:
            raise InvalidInput(f"baseUrl is required for {kind} connections", field="baseUrl")
        return DEFAULT_BASE_URLS[kind]
    try:
        check_url_syntax(given)
    except OutboundRefused as refused:
        raise InvalidInput(str(refused), field="baseUrl") from refused
    return given.rstrip("/")


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _default_api_version(kind: str) -> str | None:
    return DEFAULT_AZURE_API_VERSION if kind == "azure_openai" else None


def _models(models: list[str], default: str | None) -> tuple[list[str], str | None]:
    """The model list without repeats, the default first in line and always in it."""
    unique = list(dict.fromkeys(models))
    if default is not None and default not in unique:
        unique.append(default)
    return unique, default or (unique[0] if unique else None)


def _require_key_optional(kind: str) -> None:
    if kind != "openai_compatible":
        raise InvalidInput(f"{kind} connections need an API key", field="apiKey")


def _set_api_key(record: ProviderConnectionRow, key: str | None, cipher: Cipher) -> None:
    if key is None:
        _require_key_optional(record.kind)
        record.api_key_encrypted = record.api_key_last4 = None
        return
    if cipher.holds(record.api_key_encrypted, key):
        return
    record.api_key_encrypted = cipher.encrypt(key)
    record.api_key_last4 = key[-4:] if len(key) >= MIN_KEY_LENGTH_FOR_HINT else None
