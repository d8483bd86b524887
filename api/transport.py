"""What a group of client operations needs from its client: one way to send a request.

Resources (`api/agents.py`, `api/deployments.py`, …) depend on this protocol, never on
`api/client.py`; the client implements it and imports the resources, so the package has no circle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Transport(Protocol):
    """Sends requests to one Orgdeck service on behalf of one organization."""

    @property
    def org_slug(self) -> str:
        """The organization requests act on when a call names none."""
        ...

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON body (an ApiError for an error answer)."""
        ...

    def stream_lines(self, path: str, *, params: dict[str, Any] | None = None) -> Iterator[str]:
        """GET a streamed answer line by line, as it arrives (an ApiError for an error answer)."""
        ...
