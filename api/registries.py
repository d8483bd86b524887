"""Wire models of prompt registries, and the client's `registries` operations.

A registry (`<orgSlug>/<name>`) holds named prompt artifacts; each artifact has immutable versions
and movable labels. Public registries can be read without a key.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator
from pydantic_core import PydanticCustomError

from api.approvals import ChangeRequestRef
from api.common import (
    SLUG_PATTERN,
    Description,
    JsonObject,
    Matching,
    OrgScoped,
    Page,
    Patch,
    Record,
    Request,
    Timestamp,
    Trimmed,
)
from api.resource import Resource, body

# A registry's name follows the same rules as an organization's slug, so `registryRef` reads as a path.
REGISTRY_NAME_PATTERN = SLUG_PATTERN
REGISTRY_REF_PATTERN = f"^{SLUG_PATTERN.strip('^$')}/{SLUG_PATTERN.strip('^$')}$"
# Artifact names: lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit.
ARTIFACT_NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9._-]{0,98}[a-z0-9])?$"
# Labels: a lowercase letter, then lowercase letters, digits, '_' and '-'.
LABEL_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
# Semantic Versioning 2.0.0, as published at semver.org.
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
# What retrieve accepts as a version: an automatic number or an explicit semantic version.
VERSION_PATTERN = rf"^[1-9]\d{{0,9}}$|{SEMVER_PATTERN}"

LATEST_LABEL = "latest"
PRODUCTION_LABEL = "production"
RESERVED_LABEL_MESSAGE = "'latest' is reserved: it always follows the newest version"
MAX_CONTENT_BYTES = 256 * 1024
MAX_CHAT_MESSAGES = 1000
MAX_LABELS_PER_PUBLISH = 20

# `{{ variable }}`: a name of letters, digits, '_' and '.', optionally padded with spaces.
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")


RegistryName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63),
    Matching(REGISTRY_NAME_PATTERN, "invalid_name", "must be lowercase letters, digits and inner hyphens"),
]
RegistryRef = Annotated[
    str,
    StringConstraints(min_length=3, max_length=127),
    Matching(REGISTRY_REF_PATTERN, "invalid_registry_ref", "must be '<orgSlug>/<registry name>'"),
]
ArtifactName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100),
    Matching(
        ARTIFACT_NAME_PATTERN,
        "invalid_name",
        "must be lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit",
    ),
]
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=40),
    Matching(LABEL_PATTERN, "invalid_label", "must be a lowercase letter then letters, digits, '_' or '-'"),
]
SemVer = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64),
    Matching(SEMVER_PATTERN, "invalid_version", "must be a semantic version such as 1.4.0 or 2.0.0-rc.1"),
]
Version = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64),
    Matching(
        VERSION_PATTERN, "invalid_version", "must be a version number (3) or a semantic version (1.4.0)"
    ),
]
Visibility = Literal["private", "public"]
ChatRole = Literal["system", "developer", "user", "assistant", "tool"]
ContentType = Literal["text", "chat"]
# A provider connection's id, a model's name or a system model's key.
ModelReference = Trimmed(200)


class ChatMessage(Request):
    role: ChatRole
    content: str


def _content_shape(value: Any) -> str | None:
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "chat"
    return None


# Content is either one text or a list of chat messages; anything else is refused with one clear message.
PromptContent = Annotated[
    Annotated[str, Tag("text")] | Annotated[list[ChatMessage], Tag("chat")],
    Discriminator(
        _content_shape,
        custom_error_type="content_shape",
        custom_error_message="must be a text or a list of chat messages ({role, content})",
    ),
]


def content_type(content: str | list[ChatMessage]) -> ContentType:
    return "text" if isinstance(content, str) else "chat"


def content_text(content: str | list[ChatMessage]) -> str:
    """The content as one text: the text itself, or each message as `[role]` and its content."""
    if isinstance(content, str):
        return content
    return "\n\n".join(f"[{message.role}]\n{message.content}" for message in content)


def content_size(content: str | list[ChatMessage]) -> int:
    """UTF-8 bytes of the text, or of all messages' contents together."""
    if isinstance(content, str):
        return len(content.encode())
    return sum(len(message.content.encode()) for message in content)


def canonical_content(content: str | list[ChatMessage]) -> str:
    """The content in the one JSON form its hash is computed over."""
    value = content if isinstance(content, str) else [m.model_dump(mode="json") for m in content]
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def template_variables(content: str | list[ChatMessage]) -> list[str]:
    """The `{{variables}}` of the content, each once, in order of first appearance."""
    texts = [content] if isinstance(content, str) else [message.content for message in content]
    found = (match.group(1) for text in texts for match in TEMPLATE_VARIABLE.finditer(text))
    return list(dict.fromkeys(found))


def missing_variables(content: str | list[ChatMessage], values: dict[str, str]) -> list[str]:
    """The content's `{{variables}}` that `values` gives no value for."""
    return [name for name in template_variables(content) if name not in values]


def rendered(content: str | list[ChatMessage], values: dict[str, str]) -> str | list[ChatMessage]:
    """The content with each `{{variable}}` replaced by its value; one without a value stays as written."""

    def filled(text: str) -> str:
        return TEMPLATE_VARIABLE.sub(lambda match: values.get(match.group(1), match.group(0)), text)

    if isinstance(content, str):
        return filled(content)
    return [ChatMessage(role=message.role, content=filled(message.content)) for message in content]


def _plain(message: ChatMessage | dict[str, str]) -> dict[str, str]:
    return message.model_dump(mode="json") if isinstance(message, ChatMessage) else message


def registry_ref(org_slug: str, name: str) -> str:
    return f"{org_slug}/{name}"


# -- requests -----------------------------------------------------------------------------


class CreateRegistry(OrgScoped):
    name: RegistryName
    visibility: Visibility = "private"
    description: Description = ""


class RegistryAddress(Request):
    registry_ref: RegistryRef = Field(description="`<orgSlug>/<name>` of the registry.")


class UpdateRegistry(RegistryAddress):
    """Only the fields sent change."""

    protected_labels: Patch[list[Label]] = Field(
        None, description="Labels moved only through approved change requests (e.g. ['production'])."
    )

    @field_validator("protected_labels")
    @classmethod
    def _not_latest(cls, labels: list[str] | None) -> list[str] | None:
        if labels is not None and LATEST_LABEL in labels:
            raise PydanticCustomError("reserved_label", RESERVED_LABEL_MESSAGE)
        return sorted(set(labels)) if labels is not None else None


class PublishArtifact(RegistryAddress):
    name: ArtifactName
    content: PromptContent = Field(
        description=f"A text, or a list of chat messages; at most {MAX_CONTENT_BYTES // 1024} KiB of text."
    )
    version: SemVer | None = Field(
        None, description="An explicit semantic version; without one the next number (1, 2, 3…) is used."
    )
    labels: list[Label] = Field(
        default_factory=list,
        max_length=MAX_LABELS_PER_PUBLISH,
        description="Labels to move onto this version (`latest` is automatic and cannot be given).",
    )
    metadata: JsonObject = Field(default_factory=dict)
    commit_message: Annotated[str, StringConstraints(max_length=2000)] = ""

    @field_validator("content")
    @classmethod
    def _bounded(cls, content: str | list[ChatMessage]) -> str | list[ChatMessage]:
        if not content:
            raise PydanticCustomError("empty_content", "must not be empty")
        if isinstance(content, list) and len(content) > MAX_CHAT_MESSAGES:
            raise PydanticCustomError("too_many_messages", f"must have at most {MAX_CHAT_MESSAGES} messages")
        size = content_size(content)
        if size > MAX_CONTENT_BYTES:
            raise PydanticCustomError(
                "content_too_large", f"must be at most {MAX_CONTENT_BYTES} bytes of text (got {size})"
            )
        return content

    @field_validator("labels")
    @classmethod
    def _assignable(cls, labels: list[str]) -> list[str]:
        if LATEST_LABEL in labels:
            raise PydanticCustomError("reserved_label", RESERVED_LABEL_MESSAGE)
        return list(dict.fromkeys(labels))


class MoveLabel(RegistryAddress):
    name: ArtifactName
    label: Label
    version: Version

    @field_validator("label")
    @classmethod
    def _assignable(cls, label: str) -> str:
        if label == LATEST_LABEL:
            raise PydanticCustomError("reserved_label", RESERVED_LABEL_MESSAGE)
        return label


class TryPrompt(RegistryAddress):
    """Run one version of a prompt on a model with values for its `{{variables}}`; nothing is saved."""

    name: ArtifactName
    version: Version
    variables: dict[str, Annotated[str, StringConstraints(max_length=MAX_CONTENT_BYTES)]] = Field(
        default_factory=dict, description="A value for each `{{variable}}` of the version."
    )
    provider_id: ModelReference | None = Field(
        None, description="One of the organization's provider connections (GET /providers)."
    )
    model_id: ModelReference | None = Field(
        None, description="With providerId: the model; default: the connection's default model."
    )
    system_model_key: ModelReference | None = Field(
        None, description="Instead of providerId: a model the operator configured (GET /providers/system)."
    )


# -- records ------------------------------------------------------------------------------


class Registry(Record):
    id: str
    registry_ref: str
    name: str
    visibility: Visibility
    description: str
    artifact_count: int
    version_count: int
    protected_labels: list[str] = Field([], description="Labels moved only through change requests.")
    created_at: Timestamp
    deleted_at: Timestamp | None = None


class Artifact(Record):
    """An artifact with where its labels point (`latest` included) and how many versions it has."""

    name: str
    latest_version: str
    version_count: int
    labels: dict[str, str] = Field(description="Label → version.")
    created_at: Timestamp
    updated_at: Timestamp


class VersionFields(Record):
    """What never changes about a version."""

    id: str
    registry_ref: str
    name: str
    version: str
    number: int = Field(description="Position in publication order: 1, 2, 3… without gaps.")
    content_type: ContentType
    content_hash: str
    variables: list[str]
    metadata: dict[str, Any]
    commit_message: str
    created_at: Timestamp


class ArtifactVersion(VersionFields):
    """A version in a listing: without its content, with the labels on it now."""

    labels: list[str]
    label_change_requests: dict[str, ChangeRequestRef] = Field(
        {},
        description="Label → the approved change request that moved it here (who asked and who "
        "approved); a label moved directly is absent.",
    )


class PromptRun(Record):
    """A version run on a model: what was sent and what came back."""

    artifact_version_id: str
    name: str
    version: str
    rendered: str = Field(
        description="The content with the variables filled in (chat messages as `[role]` blocks)."
    )
    provider_id: str | None = None
    system_model_key: str | None = None
    model: str = Field(description="The model that answered, as its provider names it.")
    answer: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: int


class RetrievedArtifact(VersionFields):
    """A version with its content, as applications fetch it. `label` says which label chose it."""

    label: str | None = None
    content: str | list[ChatMessage]


class PublishedArtifact(RetrievedArtifact):
    """The answer to a publish; `created` is false when the same content was already published."""

    created: bool
    labels: list[str]


# -- client -------------------------------------------------------------------------------


class RegistriesResource(Resource):
    def create(
        self,
        name: str,
        *,
        visibility: Visibility = "private",
        description: str | None = None,
        org_slug: str | None = None,
    ) -> Registry:
        payload = body(
            CreateRegistry,
            org_slug=self._org(org_slug),
            name=name,
            visibility=visibility,
            description=description,
        )
        return Registry.model_validate(self._client.request("POST", "/registries", json=payload))

    def list(
        self,
        *,
        include_deleted: bool = False,
        limit: int | None = None,
        offset: int | None = None,
        org_slug: str | None = None,
    ) -> Page[Registry]:
        params = {
            "orgSlug": self._org(org_slug),
            "includeDeleted": include_deleted,
            "limit": limit,
            "offset": offset,
        }
        return Page[Registry].model_validate(self._client.request("GET", "/registries", params=params))

    def delete(self, registry_ref: str) -> Registry:
        """Soft delete: the registry and its artifacts answer 404 until restored."""
        answer = self._client.request("DELETE", "/registries", params={"registryRef": registry_ref})
        return Registry.model_validate(answer)

    def update(self, registry_ref: str, *, protected_labels: list[str] | None = None) -> Registry:
        """Set which labels move only through approved change requests (admin)."""
        payload = body(UpdateRegistry, registry_ref=registry_ref, protected_labels=protected_labels)
        return Registry.model_validate(self._client.request("PATCH", "/registries", json=payload))

    def restore(self, registry_ref: str) -> Registry:
        payload = body(RegistryAddress, registry_ref=registry_ref)
        return Registry.model_validate(self._client.request("POST", "/registries/restore", json=payload))

    def publish(
        self,
        registry_ref: str,
        name: str,
        content: str | list[ChatMessage] | list[dict[str, str]],
        *,
        version: str | None = None,
        labels: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        commit_message: str | None = None,
    ) -> PublishedArtifact:
        payload = body(
            PublishArtifact,
            registry_ref=registry_ref,
            name=name,
            version=version,
            labels=labels,
            metadata=metadata,
            commit_message=commit_message,
        )
        # Set apart: messages may be given as ChatMessage or as plain dicts, and go as they are.
        payload["content"] = content if isinstance(content, str) else [_plain(m) for m in content]
        answer = self._client.request("POST", "/registries/artifacts", json=payload)
        return PublishedArtifact.model_validate(answer)

    def artifacts(
        self, registry_ref: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[Artifact]:
        params = {"registryRef": registry_ref, "limit": limit, "offset": offset}
        return Page[Artifact].model_validate(
            self._client.request("GET", "/registries/artifacts", params=params)
        )

    def versions(
        self, registry_ref: str, name: str, *, limit: int | None = None, offset: int | None = None
    ) -> Page[ArtifactVersion]:
        """The artifact's versions, newest first."""
        params = {"registryRef": registry_ref, "name": name, "limit": limit, "offset": offset}
        answer = self._client.request("GET", "/registries/artifacts/versions", params=params)
        return Page[ArtifactVersion].model_validate(answer)

    def retrieve(
        self, registry_ref: str, name: str, *, version: str | None = None, label: str | None = None
    ) -> RetrievedArtifact:
        """One version: by `version`, by `label`, or else `production` if set and `latest` if not."""
        params = {"registryRef": registry_ref, "name": name, "version": version, "label": label}
        answer = self._client.request("GET", "/registries/artifacts/retrieve", params=params)
        return RetrievedArtifact.model_validate(answer)

    def try_prompt(
        self,
        registry_ref: str,
        name: str,
        version: str,
        *,
        variables: dict[str, str] | None = None,
        provider_id: str | None = None,
        model_id: str | None = None,
        system_model_key: str | None = None,
    ) -> PromptRun:
        """Run `version` on a model (a provider connection, or a system model) with `variables`; nothing is saved."""
        payload = body(
            TryPrompt,
            registry_ref=registry_ref,
            name=name,
            version=version,
            variables=variables,
            provider_id=provider_id,
            model_id=model_id,
            system_model_key=system_model_key,
        )
        answer = self._client.request("POST", "/registries/artifacts/try", json=payload)
        return PromptRun.model_validate(answer)

    def move_label(self, registry_ref: str, name: str, label: str, version: str) -> ArtifactVersion:
        """Point `label` at `version` (taking it off whichever version had it)."""
        payload = body(MoveLabel, registry_ref=registry_ref, name=name, label=label, version=version)
        answer = self._client.request("POST", "/registries/artifacts/labels", json=payload)
        return ArtifactVersion.model_validate(answer)
