"""The drafting models every organization may use: the built-in drafter and the operator's own.

`ORGDECK_SYSTEM_MODELS` lists them, comma-separated, as `key=kind:model` or `key=kind:model@baseUrl`
(e.g. `gpt=openai:gpt-4o-mini,claude=anthropic:claude-sonnet-4-5,local=openai_compatible:llama3.1:8b@http://127.0.0.1:11434/v1`).
Each one's API key comes from `ORGDECK_SYSTEM_MODEL_<KEY>_API_KEY` (key upper-cased, other
characters as `_`), so that keys live in the secret store of the deployment, never in a list.
These URLs are the operator's own configuration, so the outbound rule for saved URLs does not apply.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from api.governance import BUILTIN_DRAFTER_KEY
from api.providers import KINDS_NEEDING_BASE_URL, PROVIDER_KINDS
from service.errors import ServiceError
from service.providers.adapters import DEFAULT_AZURE_API_VERSION, DEFAULT_BASE_URLS, ModelEndpoint
from service.settings import Settings

BUILTIN_KIND = "builtin"
BUILTIN_DESCRIPTION = (
    "Built-in template drafter: turns the instructions into a structured rule offline, "
    "with no language model. The default."
)
_ENTRY = re.compile(r"^(?P<key>[A-Za-z0-9_.-]+)=(?P<kind>[a-z_]+):(?P<model>[^@]+?)(?:@(?P<base_url>.+))?$")


class SystemModelsMisconfigured(ServiceError):
    """An entry of ORGDECK_SYSTEM_MODELS that cannot be understood: the operator's to fix."""

    status = 500
    code = "system_models_misconfigured"


@dataclass(frozen=True)
class SystemModelEntry:
    key: str
    kind: str
    model: str
    base_url: str

    @property
    def api_key_variable(self) -> str:
        return f"ORGDECK_SYSTEM_MODEL_{re.sub(r'[^A-Z0-9]', '_', self.key.upper())}_API_KEY"

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_variable) or None

    @property
    def available(self) -> bool:
        """Whether it can be called: every kind but a self-hosted OpenAI-compatible one needs a key."""
        return self.kind == "openai_compatible" or self.api_key is not None

    def endpoint(self) -> ModelEndpoint:
        return ModelEndpoint(
            role="system model",
            name=self.key,
            kind=self.kind,
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            api_version=DEFAULT_AZURE_API_VERSION if self.kind == "azure_openai" else None,
        )


def parse_entry(text: str) -> SystemModelEntry:
    match = _ENTRY.match(text.strip())
    if match is None:
        raise SystemModelsMisconfigured(
            f"ORGDECK_SYSTEM_MODELS: '{text}' is not key=kind:model or key=kind:model@baseUrl"
        )
    key, kind, model, base_url = match.group("key", "kind", "model", "base_url")
    if key == BUILTIN_DRAFTER_KEY:
        raise SystemModelsMisconfigured(
            f"ORGDECK_SYSTEM_MODELS: '{BUILTIN_DRAFTER_KEY}' is the built-in drafter's key"
        )
    if kind not in PROVIDER_KINDS:
        raise SystemModelsMisconfigured(
            f"ORGDECK_SYSTEM_MODELS: '{text}': kind must be one of {', '.join(PROVIDER_KINDS)}"
        )
    if base_url is None and kind in KINDS_NEEDING_BASE_URL:
        raise SystemModelsMisconfigured(f"ORGDECK_SYSTEM_MODELS: '{text}': {kind} needs @baseUrl")
    return SystemModelEntry(key=key, kind=kind, model=model, base_url=base_url or DEFAULT_BASE_URLS[kind])


def configured_system_models(settings: Settings) -> list[SystemModelEntry]:
    return [parse_entry(text) for text in settings.system_models]
