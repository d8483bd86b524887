"""Verifying an OpenID Connect token (a JWT) with joserfc: its signature against its issuer's
published keys, then `iss`, `aud`, `exp` and `nbf`, within the allowed clock skew. Each refusal is
a 401 whose code says why (`token_expired`, `invalid_token`)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import ExpiredTokenError, JoseError

from service.errors import Unauthorized
from service.signin.keysets import IssuerKeys

# Signatures by public keys only: a shared-secret (HS*) or unsigned token proves nothing here.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class InvalidToken(Unauthorized):
    code = "invalid_token"


def looks_like_jwt(credential: str) -> bool:
    """A JWS in compact form: three base64url parts separated by dots."""
    return credential.count(".") == 2 and credential.startswith("eyJ")


def unverified_claims(token: str) -> dict[str, Any]:
    """The claims as the token states them, before anything is verified: its `iss` and `aud` say
    whose keys to verify it with and whether it is a person's or a workload's, nothing more."""
    try:
        claims = json.loads(jws.extract_compact(token.encode()).payload)
    except (JoseError, ValueError) as exc:
        raise InvalidToken("The bearer token is not a well-formed JWT") from exc
    if not isinstance(claims, dict) or not isinstance(claims.get("iss"), str) or not claims["iss"]:
        raise InvalidToken("The token names no issuer (iss)")
    return claims


class Signatures:
    """Tokens whose signature verified, with their claims, by token: a token is sent with every
    request of its session, and its signature (two thirds of a token's cost) is the same each
    time. Only the signature is remembered; the claims are checked at every request. The oldest
    are forgotten past `size`."""

    def __init__(self, keys: IssuerKeys, size: int = 4096) -> None:
        self.keys = keys
        self.size = size
        self._verified: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def claims(self, token: str, issuer: str) -> dict[str, Any]:
        """The claims of `token`, its signature verified with the keys `issuer` publishes, or 401."""
        with self._lock:
            claims = self._verified.get(token)
        if claims is not None:
            return claims
        try:
            kid = jws.extract_compact(token.encode()).headers().get("kid")
            claims = jwt.decode(token, self.keys.for_key_id(issuer, kid), algorithms=list(ALGORITHMS)).claims
        except JoseError as exc:
            raise InvalidToken(
                f"The token's signature does not verify with the keys '{issuer}' publishes"
            ) from exc
        with self._lock:
            self._verified[token] = claims
            while len(self._verified) > self.size:
                self._verified.popitem(last=False)
        return claims


def verified_claims(
    token: str, *, signatures: Signatures, issuer: str, audiences: list[str], skew_seconds: int
) -> dict[str, Any]:
    """The claims of a token `issuer` signed for one of `audiences` that is valid now, or 401."""
    claims = signatures.claims(token, issuer)
    registry = jwt.JWTClaimsRegistry(
        leeway=skew_seconds,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "values": audiences},
        exp={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError as exc:
        raise Unauthorized("The token has expired; sign in again", code="token_expired") from exc
    except JoseError as exc:
        raise InvalidToken(f"The token is not valid here: {exc.description or exc.error}") from exc
    return claims
