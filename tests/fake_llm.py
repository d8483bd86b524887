"""A language-model provider on loopback speaking OpenAI chat completions and Anthropic Messages.

It records every request exactly as received and answers as told: a normal answer, a status with
an error body, a malformed body, or nothing until long after any sensible timeout.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from service.runtime.server import ServerThread
from service.settings import Settings
from tests.conftest import make_settings
from tests.processes import http_peer

REPLY = "Title: Keep secrets out of logs\nRules:\n1. MUST NOT log secrets."
LOGGING_CHECK = '!agent.tools.exists(t, t.ref == "logs.write")'


def drafted(rule_text: str = REPLY, check: str = LOGGING_CHECK, **changes: Any) -> str:
    """A drafting answer as the service asks a model for it: JSON with the rule, a check, a message
    and examples (a pass with no tools, a fail with logs.write), with `changes` made to it."""
    agent = {"stableKey": "a", "provider": "openai", "model": "gpt-4o", "providerConfig": {}, "tags": []}
    environment = {"name": "production", "protected": True, "target": "webhook"}
    examples = [
        {
            "name": "no logging tool",
            "input": {"agent": {**agent, "tools": []}, "environment": environment},
            "expect": "pass",
        },
        {
            "name": "writes logs",
            "input": {"agent": {**agent, "tools": [{"ref": "logs.write"}]}, "environment": environment},
            "expect": "fail",
        },
    ]
    answer = {"ruleText": rule_text, "check": check, "message": "Writes logs.", "examples": examples}
    return json.dumps(answer | changes)


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeLLM:
    url: str
    requests: list[Received] = field(default_factory=list)
    # How to answer: "ok", "malformed", "slow", or an HTTP status to fail with.
    behaviour: str | int = "ok"
    reply: str = REPLY
    # Answers to give in turn before `reply`, one per request.
    replies: list[str] = field(default_factory=list)
    slow_seconds: float = 3.0
    error_message: str = "Incorrect API key provided"

    @property
    def last(self) -> Received:
        assert self.requests, "the provider received no request"
        return self.requests[-1]


def _next_reply(fake: FakeLLM) -> str:
    return fake.replies.pop(0) if fake.replies else fake.reply


def _openai_answer(fake: FakeLLM, request: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": f"{request.get('model', 'azure-deployment')}-2025-01-01",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": _next_reply(fake)},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 45, "total_tokens": 165},
    }


def _anthropic_answer(fake: FakeLLM, request: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": [{"type": "text", "text": _next_reply(fake)}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 80, "output_tokens": 30},
    }


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"null")
            parts = urlsplit(self.path)
            fake.requests.append(
                Received(
                    "POST",
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
            )
            if fake.behaviour == "slow":
                time.sleep(fake.slow_seconds)
            if isinstance(fake.behaviour, int):
                error = {"error": {"type": "error", "message": fake.error_message}}
                extra = {"Retry-After": "20"} if fake.behaviour == 429 else {}
                return self._send(fake.behaviour, json.dumps(error).encode(), extra)
            if fake.behaviour == "malformed":
                return self._send(200, b'{"choices": []}')
            answer = _anthropic_answer if parts.path.endswith("/v1/messages") else _openai_answer
            self._send(200, json.dumps(answer(fake, body)).encode())

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller gave up waiting, as it should

        def log_message(self, *_args: object) -> None:
            pass

    return Handler


@contextmanager
def running_fake_llm() -> Iterator[FakeLLM]:
    """A fake provider serving on a free loopback port until the block ends."""
    fake = FakeLLM(url="")
    with http_peer(_handler(fake)) as server:
        fake.url = f"http://127.0.0.1:{server.server_address[1]}"
        yield fake


@contextmanager
def service_with(settings: Settings, database_url: str, **overrides: object) -> Iterator[ServerThread]:
    """Another service on the test database and encryption key, with some settings changed."""
    server = ServerThread(make_settings(settings.data_dir, database_url, **overrides)).start()
    try:
        yield server
    finally:
        server.stop()
