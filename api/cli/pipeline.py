"""A pipeline's own identity instead of a stored key: the CI job's OpenID Connect token, which the
service accepts for a trusted workload (/workload-identities).

Read from ORGDECK_OIDC_TOKEN (GitLab's `id_tokens:`, or any platform that hands its jobs a token),
else fetched from GitHub Actions (a job with `permissions: id-token: write` has
ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN) for the audience in
ORGDECK_OIDC_AUDIENCE (default `orgdeck`)."""

from __future__ import annotations

import os

import httpx

DEFAULT_AUDIENCE = "orgdeck"
# The token request is one small call to the runner's own service.
TIMEOUT_SECONDS = 10.0


class PipelineTokenError(Exception):
    """The CI platform did not hand out a token; the message says what it answered."""


def pipeline_token() -> str | None:
    """The job's OpenID Connect token, or None outside a pipeline that offers one."""
    token = os.environ.get("ORGDECK_OIDC_TOKEN", "").strip()
    if token:
        return token
    url = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL")
    request_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    if not url or not request_token:
        return None
    audience = os.environ.get("ORGDECK_OIDC_AUDIENCE") or DEFAULT_AUDIENCE
    try:
        answer = httpx.get(
            url,
            params={"audience": audience},
            headers={"Authorization": f"bearer {request_token}"},
            timeout=TIMEOUT_SECONDS,
        )
        answer.raise_for_status()
        value = answer.json().get("value")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise PipelineTokenError(f"GitHub Actions gave no OpenID Connect token: {exc}") from exc
    if not isinstance(value, str) or not value:
        raise PipelineTokenError("GitHub Actions answered without a token ('value')")
    return value
