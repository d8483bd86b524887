"""The published keys of OpenID Connect issuers: each issuer's discovery document names its JWKS,
both fetched with a timeout and kept; a token signed with a key id the kept set lacks fetches the
set again (the issuer rotated its keys), at most once per `refresh_seconds` per issuer, so tokens
with made-up key ids cannot turn into a flood of fetches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from joserfc.jwk import KeySet

from service.errors import Unauthorized
from service.outbound.urls import OutboundRefused


class IssuerUnavailable(Unauthorized):
    def __init__(self, issuer: str, reason: str) -> None:
        super().__init__(
            f"The identity provider '{issuer}' could not be reached to check the token: {reason}",
            code="issuer_unavailable",
        )


@dataclass
class _Kept:
    keys: KeySet
    fetched_at: float
    kids: frozenset[str] = field(default_factory=frozenset)


class IssuerKeys:
    """The key sets of the issuers the service has verified tokens of, kept in this process."""

    def __init__(
        self,
        *,
        timeout_seconds: float,
        refresh_seconds: float,
        check_url: Callable[[str], None] = lambda url: None,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.refresh_seconds = refresh_seconds
        # Refuses an address the service must not call (an organization's workload issuer).
        self.check_url = check_url
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()

    def for_key_id(self, issuer: str, kid: str | None) -> KeySet:
        """The issuer's key set, fetched again when it lacks `kid` and was not fetched just now."""
        kept = self._kept.get(issuer)
        if kept is not None and (kid is None or kid in kept.kids):
            return kept.keys
        with self._lock:
            kept = self._kept.get(issuer)
            recent = kept is not None and time.monotonic() - kept.fetched_at < self.refresh_seconds
            if kept is None or (kid not in kept.kids and not recent):
                keys = self._fetch(issuer)
                kept = _Kept(keys, time.monotonic(), frozenset(k.kid for k in keys if k.kid))
                self._kept[issuer] = kept
            return kept.keys

    def _fetch(self, issuer: str) -> KeySet:
        discovery_url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            self.check_url(discovery_url)
            with httpx.Client(timeout=self.timeout_seconds, follow_redirects=False) as http:
                document = http.get(discovery_url).raise_for_status().json()
                jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
                if not isinstance(jwks_uri, str):
                    raise IssuerUnavailable(issuer, "its discovery document names no jwks_uri")
                self.check_url(jwks_uri)
                return KeySet.import_key_set(http.get(jwks_uri).raise_for_status().json())
        except (httpx.HTTPError, ValueError, OutboundRefused) as exc:
            raise IssuerUnavailable(issuer, str(exc) or type(exc).__name__) from exc
