"""Which change requests wait for the signed-in member, and whose a request is: a person's own
request is theirs whichever of their keys opened it, so it is judged by member, not by key."""

from __future__ import annotations

from api import ApiError
from api.changes import ChangeRequest
from api.common import MAX_PAGE_SIZE
from components.connection import Connection, client, current
from components.tables import OPEN_PARAM

MENU_TITLE = "Changes"
# The Changes page opens the request a link names (`?open=chg_…`), as other pages open their items.
REQUEST_QUERY = OPEN_PARAM


def awaiting_me() -> list[ChangeRequest]:
    """Open requests the signed-in member may approve now (none for a service key: it reviews nothing)."""
    if current().caller.member is None:
        return []
    return client().change_requests.list(awaiting_my_review=True, limit=MAX_PAGE_SIZE).items


def menu_title(connection: Connection | None) -> str:
    """`Changes (2)` while two requests wait for this member's review. The menu must draw even when
    the count cannot be read, so a refusal leaves the plain title."""
    if connection is None:
        return MENU_TITLE
    try:
        waiting = len(awaiting_me())
    except ApiError:
        return MENU_TITLE
    return f"{MENU_TITLE} ({waiting})" if waiting else MENU_TITLE


def opened_by_me(request: ChangeRequest) -> bool:
    """Whether the signed-in caller opened it: as the same member (any of their keys), or, for a
    service key, as that key."""
    caller = current().caller
    if caller.member is not None and request.requested_by.member_id is not None:
        return request.requested_by.member_id == caller.member.id
    return request.requested_by.key_id == caller.key_id


def pending_for(requests: list[ChangeRequest], environment_id: str) -> list[ChangeRequest]:
    """The open requests that would change, or deploy to, this environment."""
    return [
        request
        for request in requests
        if request.kind in ("deployment", "environment")
        and request.payload.get("environmentId") == environment_id
    ]


def pending_labels(requests: list[ChangeRequest], registry_ref: str) -> dict[tuple[str, str], ChangeRequest]:
    """Open label moves of a registry, by (artifact, label)."""
    return {
        (request.payload["name"], request.payload["label"]): request
        for request in requests
        if request.kind == "label" and request.payload.get("registryRef") == registry_ref
    }


def open_requests() -> list[ChangeRequest]:
    """Every open request, for a page that marks what is pending."""
    return client().change_requests.list(status="open", limit=MAX_PAGE_SIZE).items
