"""The audit trail as it is written: every route that changes something appends one event, in the
transaction of the change (service.audit reads it).

A route working in a write session calls `record` when its function returns (service.http.routing):
if its session wrote anything, one event is added to that same session before the commit: the actor
(the route's `caller`), the action (the operation's id), the target and the fields the body set,
secret fields and credentials in free-form objects redacted (service/redaction/objects.py), URLs cut to
their host. The target is what the route returned: its type, id and name; a record without an id
of its own names what it belongs to (a signing key its environment, a recovery its channel), and
the organization's settings name the organization. A request that fails writes nothing, its event
included, but for a refusal that is itself on record (service.errors.RefusalOnRecord: a deployment
a deny policy refuses), whose event is written after the refused work is rolled back; a request
that changed nothing (a list, a preview, a PATCH or PUT equal to what is stored) leaves none: only
a net change of a row counts as a write, not an attribute set to the value it had.

A change applied by an approved change request is on record as its direct call would be
(`record_applied`): the same action, target and fields, its requester the actor, naming the request
and the approvals that applied it, as they were then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy import event, insert
from sqlalchemy.orm import Session
from starlette.responses import Response

from api.approvals import ChangeRequestRef
from api.common import Request
from service.redaction.logs import redact_urls
from service.redaction.objects import REDACTED, shown
from service.storage.db import utcnow
from service.storage.ids import new_id
from service.trail.models import AuditEventRow

WROTE = "orgdeck_wrote"
_WRAPPERS = re.compile(r"^(Created|Published)|(Detail|WithVersions)$")
_NAMES = ("name", "stable_key", "email", "label")


class Actor(Protocol):
    """Who made a change, as the trail names them (a request's caller)."""

    org_id: str
    org_name: str
    key_id: str
    key_name: str
    member_id: str | None
    member_email: str | None
    via: str
    claims: Mapping[str, Any] | None


def record(
    session: Session,
    *,
    actor: Actor,
    action: str,
    result: Any,
    arguments: dict[str, Any],
    request_id: str | None,
) -> None:
    """Add the event for a request that wrote something (nothing otherwise)."""
    if not session.info.get(WROTE):
        return
    who = {
        "actor_key_id": actor.key_id,
        "actor_key_name": actor.key_name,
        "actor_member_id": actor.member_id,
        "actor_member_email": actor.member_email,
        "actor_via": None if actor.via == "key" else actor.via,
        "actor_claims": dict(actor.claims) if actor.claims else None,
    }
    _append(session, actor.org_id, actor.org_name, who, action, result, _changes(arguments), request_id)


def record_use(session: Session) -> None:
    """Have the request's event added though it changed no row: a use that is on record of its own
    (a prompt run on a model, with whose key the trail must tell)."""
    session.info[WROTE] = True


def record_applied(
    session: Session,
    *,
    org_id: str,
    change_request: ChangeRequestRef,
    action: str,
    result: Any,
    body: Request | None,
    request_id: str | None,
) -> None:
    """Add the event of a change an approved change request applied: `action` with `body`
    answering `result`, as its direct call would have recorded it, with the requester as its actor."""
    requester = change_request.requested_by
    who = {
        "actor_key_id": requester.key_id,
        "actor_key_name": requester.key_name,
        "actor_member_id": requester.member_id,
        "actor_member_email": requester.email,
    }
    changes = _redacted(body) if body is not None else {}
    _append(session, org_id, None, who, action, result, changes, request_id, change_request=change_request)


def record_by_worker(
    session: Session, *, org_id: str, action: str, result: Any, changes: dict[str, Any]
) -> None:
    """Add the event of a change the background worker made of its own accord (a rollout it
    stopped or rolled back), with the worker as its actor (`via` `worker`, no key or member)."""
    who = {"actor_key_name": "worker", "actor_via": "worker"}
    _append(session, org_id, None, who, action, result, changes, None)


def _append(
    session: Session,
    org_id: str,
    org_name: str | None,
    who: dict[str, Any],
    action: str,
    result: Any,
    changes: dict[str, Any],
    request_id: str | None,
    *,
    change_request: ChangeRequestRef | None = None,
) -> None:
    target_type, target_id, target_name = _target(result, org_id, org_name)
    # A plain INSERT on the session's connection: the unit of work would cost a write a third more.
    session.connection().execute(
        _APPEND,
        {
            "id": new_id("aud"),
            "org_id": org_id,
            "occurred_at": utcnow(),
            **who,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "target_name": target_name,
            "request_id": request_id,
            "changes": changes,
            "change_request": change_request,
        },
    )


_APPEND = insert(AuditEventRow)


# A session is marked when it flushes a change or runs an INSERT, UPDATE or DELETE. An object set to
# the values it had is dirty without a change (the flush writes nothing for it), so only a net
# change of one counts; the flush has not yet reset what each attribute held when this runs.
@event.listens_for(Session, "after_flush")
def _flushed(session: Session, _context: Any) -> None:
    if session.new or session.deleted or any(session.is_modified(row) for row in session.dirty):
        session.info[WROTE] = True


@event.listens_for(Session, "do_orm_execute")
def _executed(state: Any) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        state.session.info[WROTE] = True


def _changes(arguments: dict[str, Any]) -> dict[str, Any]:
    for value in arguments.values():
        if isinstance(value, Request):
            return _redacted(value)
    return {}


def _redacted(body: Request) -> dict[str, Any]:
    """The fields the body set, in wire names; secret fields hidden, URLs cut to their host."""
    fields = type(body).model_fields
    set_fields = body.model_fields_set - {"org_slug"}
    secret = {fields[name].alias or name for name in set_fields if fields[name].repr is False}
    dumped = body.model_dump(mode="json", by_alias=True, include=set_fields)
    return {
        key: REDACTED if key in secret else _without_urls(shown(key, value))
        for key, value in sorted(dumped.items())
    }


def _without_urls(value: Any) -> Any:
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, dict):
        return {key: _without_urls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_urls(item) for item in value]
    return value


def _target(result: Any, org_id: str, org_name: str | None) -> tuple[str | None, str | None, str | None]:
    """The type, id and name of what a write changed, read from what it returned."""
    values = _as_dict(result)
    name = next((str(values[key]) for key in _NAMES if values.get(key) is not None), None)
    if values.get("id") is not None:
        return _target_type(result), str(values["id"]), name
    owner = next((key for key in values if key.endswith("_id") and values[key] is not None), None)
    if owner is not None:
        return owner.removesuffix("_id"), str(values[owner]), name
    return _target_type(result), org_id, org_name


def _as_dict(result: Any) -> dict[str, Any]:
    """The identifying fields of a result, by attribute name: its id, name, and the ids it names."""
    if isinstance(result, BaseModel):
        fields = type(result).model_fields
        wanted = {"id", *_NAMES} | {name for name in fields if name.endswith("_id")}
        return result.model_dump(by_alias=False, include=wanted & fields.keys())
    if isinstance(result, Response) and result.media_type == "application/json":
        loaded = json.loads(result.body)
        return {_snake(key): value for key, value in loaded.items()} if isinstance(loaded, dict) else {}
    return {}


def _target_type(result: Any) -> str | None:
    if not isinstance(result, BaseModel):
        return None
    return _snake(_WRAPPERS.sub("", type(result).__name__))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
