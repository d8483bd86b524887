"""The rule for every call the service makes to a URL someone gave it (providers, webhooks, Slack).

A URL whose host resolves to a private, loopback, link-local or otherwise non-public address is
refused unless the operator allows it with `ORGDECK_OUTBOUND_ALLOW_PRIVATE` (host names, IP
addresses or CIDRs, comma-separated; `*` allows every address). Without this rule anyone who can
save a URL could make the service probe its own network (server-side request forgery).

The check runs right before each call, since what a name resolves to can change after it is saved.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from service.settings import Settings

ALLOWED_SCHEMES = frozenset({"http", "https"})
ALLOW_EVERY_ADDRESS = "*"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(Exception):
    """A URL the service will not call; the message says why and what the operator can do."""


class HostUnresolved(OutboundRefused):
    """A host name that does not resolve now: unlike a refusal, it may resolve on a later try."""


def check_url_syntax(url: str) -> None:
    """Refuse what can never be called: another scheme, no host, credentials in the URL, a host or
    port that does not parse (an unclosed `[`, a port past 65535)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that does not parse raises here
    except ValueError as exc:
        raise OutboundRefused(f"'{url}' is not a URL: {exc}") from exc
    if parts.scheme not in ALLOWED_SCHEMES:
        raise OutboundRefused(f"'{url}' must start with http:// or https://")
    if not parts.hostname:
        raise OutboundRefused(f"'{url}' has no host")
    if parts.username or parts.password:
        raise OutboundRefused("Credentials do not belong in the URL; use the API key field")


def check_outbound_url(url: str, settings: Settings) -> None:
    """Raise OutboundRefused unless the service may call `url` now."""
    check_url_syntax(url)
    host = urlsplit(url).hostname or ""
    allowed = settings.outbound_allow_private
    if ALLOW_EVERY_ADDRESS in allowed or host.lower() in {entry.lower() for entry in allowed}:
        return
    for address in _resolve(host, urlsplit(url).port):
        if not address.is_global and not _allowed_address(address, allowed):
            raise OutboundRefused(
                f"'{host}' resolves to the non-public address {address}; the operator can allow it "
                "with ORGDECK_OUTBOUND_ALLOW_PRIVATE (a host, an address or a CIDR, or * for all)"
            )


def _resolve(host: str, port: int | None) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        answers = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise HostUnresolved(f"'{host}' cannot be resolved: {exc.strerror or exc}") from exc
    except UnicodeError as exc:  # a name IDNA cannot encode: a control character, an empty label
        raise OutboundRefused(f"'{host}' is not a host name: {exc}") from exc
    # An IPv6 answer may carry a scope ("fe80::1%eth0"): the address is what comes before it.
    return [ipaddress.ip_address(str(answer[4][0]).split("%")[0]) for answer in answers]


def _allowed_address(address: IPAddress, allowed: list[str]) -> bool:
    for entry in allowed:
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue  # a host name entry, compared by name above
    return False
