"""OrgdeckClient: the one way the console, pipelines and scripts talk to the service."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
from pydantic import ValidationError

from api import constants
from api.agents import AgentsResource
from api.api_keys import ApiKey, ApiKeysResource
from api.audit import AuditResource
from api.changes import ChangeRequestsResource, SettingsResource
from api.common import ErrorDetail
from api.deployments import DeploymentsResource
from api.environments import EnvironmentsResource
from api.errors import ApiError, ConnectionFailed, error_for_status
from api.fleets import FleetsResource
from api.governance import PoliciesResource
from api.headers import RETRY_AFTER_HEADER, retry_after_seconds
from api.members import MembersResource
from api.notifications import NotificationsResource
from api.providers import ProvidersResource
from api.registries import RegistriesResource
from api.signin import SignInSession, WorkloadIdentitiesResource
from api.system import Caller, Health, least_roles
from api.tools import ToolDeploymentsResource, ToolsResource


def new_http_client(timeout: float = constants.DEFAULT_TIMEOUT_SECONDS) -> httpx.Client:
    """The HTTP client (a connection pool) an OrgdeckClient makes for itself. One made here may
    serve several (`http_client=`): making one costs 20 to 40 ms, for its TLS context."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=constants.DEFAULT_CONNECT_TIMEOUT_SECONDS),
        headers={"User-Agent": constants.USER_AGENT},
    )


class OrgdeckClient:
    """A client of one Orgdeck service, authenticated with one organization's key.

    `base_url` includes the `/api` prefix, e.g. `http://127.0.0.1:8000/api`. Pass `http_client` to
    reuse a connection pool or to talk to an in-process app (any `httpx.Client` works).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        org_slug: str | None = None,
        timeout: float = constants.DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = constants.DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.max_retries = max_retries
        self._org_slug = org_slug
        self._least_roles: dict[str, str | None] | None = None
        self._owns_http = http_client is None
        self._http = http_client or new_http_client(timeout)
        self.api_keys = ApiKeysResource(self)
        self.members = MembersResource(self)
        self.workload_identities = WorkloadIdentitiesResource(self)
        self.audit = AuditResource(self)
        self.agents = AgentsResource(self)
        self.fleets = FleetsResource(self)
        self.registries = RegistriesResource(self)
        self.environments = EnvironmentsResource(self)
        self.tools = ToolsResource(self)
        self.tool_deployments = ToolDeploymentsResource(self)
        self.providers = ProvidersResource(self)
        self.policies = PoliciesResource(self)
        self.notifications = NotificationsResource(self)
        self.deployments = DeploymentsResource(self)
        self.change_requests = ChangeRequestsResource(self)
        self.settings = SettingsResource(self)

    # -- plumbing -------------------------------------------------------------------------

    @property
    def org_slug(self) -> str:
        """The organization requests act on: given at construction, else the key's own."""
        if self._org_slug is None:
            self._org_slug = self.whoami().org_slug
        return self._org_slug

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send one request, retrying what is safe to retry, and return the decoded JSON body.

        A POST or PATCH carries an `Idempotency-Key` (a new one per call unless `headers` gives one),
        the same on every attempt, so it is retried like a read: the service does it at most once. A
        client that never retries (`max_retries=0`) sends none of its own: a key of one attempt would
        only cost the service its claim and its stored answer.
        """
        method = method.upper()
        all_headers = self._credentials(headers)
        if (
            self.max_retries
            and method in constants.KEYED_METHODS
            and not _has_header(all_headers, constants.IDEMPOTENCY_HEADER)
        ):
            all_headers[constants.IDEMPOTENCY_HEADER] = str(uuid.uuid4())
        retry_safe = method in constants.SAFE_METHODS or _has_header(
            all_headers, constants.IDEMPOTENCY_HEADER
        )
        url = self.base_url + path
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        for attempt in range(self.max_retries + 1):
            last_attempt = attempt == self.max_retries
            try:
                response = self._http.request(
                    method, url, params=clean_params, json=json, headers=all_headers
                )
            except httpx.TransportError as exc:
                if last_attempt or not retry_safe:
                    raise ConnectionFailed(f"Could not reach {self.base_url}: {exc}") from exc
                time.sleep(_backoff(attempt))
                continue
            delay = None if last_attempt else _retry_delay(response, attempt, retry_safe=retry_safe)
            if delay is None:
                return _decode(response)
            time.sleep(delay)
        raise AssertionError("unreachable: the last attempt always returns or raises")

    def stream_lines(self, path: str, *, params: dict[str, Any] | None = None) -> Iterator[str]:
        """GET a streamed answer (NDJSON) line by line, as it arrives; an ApiError for an error
        answer. Not retried: a stream cut short is started again by its caller."""
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            with self._http.stream(
                "GET", self.base_url + path, params=clean_params, headers=self._credentials(None)
            ) as response:
                if not response.is_success:
                    response.read()
                    _decode(response)
                yield from response.iter_lines()
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"Could not reach {self.base_url}: {exc}") from exc

    def _credentials(self, headers: dict[str, str] | None) -> dict[str, str]:
        all_headers = dict(headers or {})
        if self.api_key and self.api_key.startswith(constants.API_KEY_PREFIX):
            all_headers["X-API-Key"] = self.api_key
        elif self.api_key:
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        return all_headers

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> OrgdeckClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- service --------------------------------------------------------------------------

    def health(self) -> Health:
        return Health.model_validate(self.request("GET", "/health"))

    def whoami(self) -> Caller:
        return Caller.model_validate(self.request("GET", "/whoami"))

    def least_role(self, operation_id: str) -> str | None:
        """The least role the service asks of a key for `operation_id` (None: anyone may call it).

        Read from the service's OpenAPI document on first use and kept for this client's life: a
        console asks it for every control it draws, and the roles change only with the service.
        An operationId the service does not have is a KeyError, so a misspelt one fails loudly
        instead of leaving a control enabled.
        """
        if self._least_roles is None:
            self._least_roles = least_roles(self.request("GET", "/openapi.json"))
        if operation_id not in self._least_roles:
            raise KeyError(f"the service has no operation {operation_id!r}")
        return self._least_roles[operation_id]

    def sign_in(self) -> ApiKey:
        """Record that a person signed in to a console with this key (an audit event); the key."""
        return ApiKey.model_validate(self.request("POST", "/sign-in", json={}))

    def sign_out(self) -> SignInSession:
        """End the session of the identity provider's token this client sends (an audit event)."""
        return SignInSession.model_validate(self.request("POST", "/sign-out", json={}))


def _decode(response: httpx.Response) -> Any:
    if response.is_success:
        return response.json() if response.content else None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error_class = error_for_status(response.status_code)
    raise error_class(
        str(body.get("message") or response.reason_phrase or "Request failed"),
        status=response.status_code,
        code=body.get("code"),
        details=_details(body.get("details")),
        retry_after=_retry_after(response),
    )


def _details(raw: Any) -> list[ErrorDetail]:
    """The error's details that have the documented shape (a proxy's error page has none)."""
    if not isinstance(raw, list):
        return []
    details = []
    for item in raw:
        try:
            details.append(ErrorDetail.model_validate(item))
        except ValidationError:
            continue
    return details


def _retry_delay(response: httpx.Response, attempt: int, *, retry_safe: bool) -> float | None:
    """How long to wait before retrying this answer, or None when it is final.

    429 is retried for any request (it was not handled). Otherwise only requests that are safe to
    send again are: a 5xx that says the service could not handle it this time (not a provider's
    own failure, reported as `provider_…`, which the same call would meet again), and 409
    `idempotency_key_in_use`, which is this call's own earlier attempt still running.
    """
    status = response.status_code
    if status == 429:
        retry_after = _retry_after(response)
        if retry_after is None:
            return _backoff(attempt)
        return retry_after if retry_after <= constants.MAX_RETRY_AFTER_SECONDS else None
    if not retry_safe:
        return None
    if status in constants.RETRYABLE_STATUSES and not _error_code(response).startswith("provider_"):
        return _retry_after(response) or _backoff(attempt)
    if status == 409 and _error_code(response) == "idempotency_key_in_use":
        return _backoff(attempt)
    return None


def _error_code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("code") or "") if isinstance(body, dict) else ""


def _has_header(headers: dict[str, str], name: str) -> bool:
    return any(key.lower() == name.lower() for key in headers)


def _retry_after(response: httpx.Response) -> float | None:
    return retry_after_seconds(response.headers.get(RETRY_AFTER_HEADER))


def _backoff(attempt: int) -> float:
    """Capped exponential backoff with full jitter."""
    ceiling = min(constants.MAX_RETRY_DELAY_SECONDS, constants.INITIAL_RETRY_DELAY_SECONDS * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)


__all__ = ["ApiError", "OrgdeckClient"]
