"""Who asked for a change applied by approval and who approved it: named by the change request and
by what the change made (a deployment job, a label's move, a policy version, its audit event)."""

from __future__ import annotations

from pydantic import Field

from api.common import Record


class Requester(Record):
    key_id: str
    key_name: str
    member_id: str | None = None
    email: str | None = None


class Approver(Record):
    member_id: str
    email: str


class ChangeRequestRef(Record):
    """The approved change request that made this."""

    id: str
    requested_by: Requester
    approved_by: list[Approver] = Field(description="The approvals that counted when it was applied.")
