"""Talking to language models over their real HTTP APIs: OpenAI chat completions (and everything
that speaks it: Azure OpenAI, Ollama, vLLM, LM Studio) and Anthropic Messages.

Every call has a deadline and a size cap, follows no redirects (a redirect could lead past the
outbound rule), and every failure becomes a ProviderFailed that names the model's owner and the
reason, with the provider's own message and never the API key.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from service.errors import ServiceError

logger = logging.getLogger("orgdeck.providers")

DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
DEFAULT_AZURE_API_VERSION = "2024-10-21"
ANTHROPIC_VERSION = "2023-06-01"
MAX_ANSWER_BYTES = 2 * 1024 * 1024
MAX_QUOTED_MESSAGE = 300
USER_AGENT = "orgdeck-service"


class ProviderFailed(ServiceError):
    """A provider call that did not produce an answer: 502 (504 on a timeout) with a precise code."""

    status = 502
    code = "provider_error"

    def __init__(self, message: str, *, code: str, status: int = 502) -> None:
        super().__init__(message, code=code)
        self.status = status


@dataclass(frozen=True)
class ModelEndpoint:
    """One model behind one HTTP API, with what is needed to call it."""

    role: str  # "provider" (an organization's connection) or "system model"
    name: str
    kind: str
    base_url: str
    model: str
    api_key: str | None = None
    api_version: str | None = None

    @property
    def label(self) -> str:
        """How messages name it: "provider 'Team OpenAI'", "system model 'gpt4o'"."""
        return f"{self.role} '{self.name}'"

    def __repr__(self) -> str:  # never show the key, wherever this ends up
        return f"ModelEndpoint({self.label}, {self.kind}, {self.base_url}, {self.model})"


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: int

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass(frozen=True)
class HttpCall:
    url: str
    headers: dict[str, str]
    payload: dict[str, Any]
    params: dict[str, str]


def complete(
    endpoint: ModelEndpoint, *, system: str, prompt: str, max_tokens: int, timeout: float
) -> Completion:
    """Ask the model one question and return its answer, or raise ProviderFailed saying why."""
    call = _anthropic_call if endpoint.kind == "anthropic" else _openai_call
    parse = _parse_anthropic if endpoint.kind == "anthropic" else _parse_openai
    request = call(endpoint, system, prompt, max_tokens)
    started = time.monotonic()
    status, headers, raw = _post(endpoint, request, timeout)
    latency_ms = round((time.monotonic() - started) * 1000)
    if not 200 <= status < 300:
        raise _failure_for_status(endpoint, status, headers, raw)
    try:
        text, model, input_tokens, output_tokens = parse(json.loads(raw))
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise _failed(
            endpoint,
            f"{endpoint.label} answered with something that is not a {_api_name(endpoint)} response ({exc})",
            "provider_bad_response",
        ) from exc
    return Completion(text, model or endpoint.model, input_tokens, output_tokens, latency_ms)


def _openai_call(endpoint: ModelEndpoint, system: str, prompt: str, max_tokens: int) -> HttpCall:
    # max_tokens is left out: OpenAI's reasoning models refuse it and the prompts ask for short answers.
    messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    base = endpoint.base_url.rstrip("/")
    if endpoint.kind == "azure_openai":
        return HttpCall(
            url=f"{base}/openai/deployments/{endpoint.model}/chat/completions",
            headers={"api-key": endpoint.api_key or ""},
            payload={"messages": messages},
            params={"api-version": endpoint.api_version or DEFAULT_AZURE_API_VERSION},
        )
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    return HttpCall(
        url=f"{base}/chat/completions",
        headers=headers,
        payload={"model": endpoint.model, "messages": messages},
        params={},
    )


def _anthropic_call(endpoint: ModelEndpoint, system: str, prompt: str, max_tokens: int) -> HttpCall:
    return HttpCall(
        url=f"{endpoint.base_url.rstrip('/')}/v1/messages",
        headers={"x-api-key": endpoint.api_key or "", "anthropic-version": ANTHROPIC_VERSION},
        payload={
            "model": endpoint.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
        },
        params={},
    )


def _parse_openai(answer: Any) -> tuple[str, str | None, int | None, int | None]:
    text = answer["choices"][0]["message"]["content"]
    if not isinstance(text, str) or not text.strip():
        raise ValueError("choices[0].message.content is empty")
    usage = answer.get("usage") or {}
    return text, answer.get("model"), usage.get("prompt_tokens"), usage.get("completion_tokens")


def _parse_anthropic(answer: Any) -> tuple[str, str | None, int | None, int | None]:
    text = "".join(block["text"] for block in answer["content"] if block.get("type") == "text")
    if not text.strip():
        raise ValueError("content has no text block")
    usage = answer.get("usage") or {}
    return text, answer.get("model"), usage.get("input_tokens"), usage.get("output_tokens")


def _post(endpoint: ModelEndpoint, call: HttpCall, timeout: float) -> tuple[int, httpx.Headers, bytes]:
    """POST and read the answer, within `timeout` overall and MAX_ANSWER_BYTES."""
    deadline = time.monotonic() + timeout
    headers = {"User-Agent": USER_AGENT, **call.headers}
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False) as http,
            http.stream("POST", call.url, json=call.payload, headers=headers, params=call.params) as answer,
        ):
            raw = bytearray()
            for chunk in answer.iter_bytes():
                raw.extend(chunk)
                if len(raw) > MAX_ANSWER_BYTES:
                    raise _failed(
                        endpoint,
                        f"{endpoint.label} sent an answer larger than {MAX_ANSWER_BYTES // 1024} KiB",
                        "provider_bad_response",
                    )
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the answer did not finish in time")
            return answer.status_code, answer.headers, bytes(raw)
    except httpx.TimeoutException as exc:
        raise _failed(
            endpoint, f"{endpoint.label} did not answer within {timeout:g} s", "provider_timeout", 504
        ) from exc
    except httpx.HTTPError as exc:
        raise _failed(
            endpoint,
            f"Could not reach {endpoint.label} at {endpoint.base_url}: {_scrub(endpoint, str(exc))}",
            "provider_unreachable",
        ) from exc


def _failure_for_status(
    endpoint: ModelEndpoint, status: int, headers: httpx.Headers, raw: bytes
) -> ProviderFailed:
    said = _provider_message(endpoint, raw)
    if status in (401, 403):
        message = f"{endpoint.label} refused the API key (HTTP {status}): {said}"
        return _failed(endpoint, message, "provider_auth_failed")
    if status == 429:
        wait = headers.get("retry-after")
        retry = f"; it asks to retry after {wait} s" if wait else ""
        message = f"{endpoint.label} is rate limiting requests (HTTP 429){retry}: {said}"
        return _failed(endpoint, message, "provider_rate_limited")
    if status < 500:
        message = (
            f"{endpoint.label} rejected the request (HTTP {status}); check the base URL and model: {said}"
        )
        return _failed(endpoint, message, "provider_request_rejected")
    return _failed(endpoint, f"{endpoint.label} failed (HTTP {status}): {said}", "provider_error")


def _provider_message(endpoint: ModelEndpoint, raw: bytes) -> str:
    """The provider's own explanation: `error.message` of OpenAI and Anthropic, else the text."""
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
    except (ValueError, AttributeError):
        pass
    text = " ".join(text.split())[:MAX_QUOTED_MESSAGE] or "no message"
    return _scrub(endpoint, text)


def _scrub(endpoint: ModelEndpoint, text: str) -> str:
    """Providers sometimes quote the key they refused; it must not travel any further."""
    return text.replace(endpoint.api_key, "[redacted]") if endpoint.api_key else text


def _failed(endpoint: ModelEndpoint, message: str, code: str, status: int = 502) -> ProviderFailed:
    logger.warning("Provider call failed: %s (%s, %s)", code, endpoint.label, endpoint.model)
    return ProviderFailed(message, code=code, status=status)


def _api_name(endpoint: ModelEndpoint) -> str:
    return "Anthropic Messages" if endpoint.kind == "anthropic" else "chat completions"
