"""What the signed-in caller may do, asked once per control: a write control below its least role
is drawn disabled, with a tooltip naming the role it needs, so nobody meets a 403 after a click.

The least roles come from the service's own OpenAPI document (through the client), never from a
second table here: a route whose role changes changes the console with it.
"""

from __future__ import annotations

from typing import Any

from api.members import ROLES, role_at_least
from components.connection import client, current


def needed_role(operation_id: str, *, at_least: str | None = None) -> str | None:
    """The role the caller lacks for `operation_id`, or None when they may call it.

    `at_least` raises the bar where the service asks more of a particular target than of the
    operation (revoking someone else's key needs an admin; one's own, the operation's role).
    """
    needed = client().least_role(operation_id) or ROLES[0]
    if at_least and not role_at_least(needed, at_least):
        needed = at_least
    return None if role_at_least(current().caller.role, needed) else needed


def refusal(needed: str) -> str:
    """The tooltip of a control the caller may not use."""
    held = current().caller.role
    return f"Needs the {needed} role; you are {_article(held)} {held}."


def control(
    operation_id: str, *, at_least: str | None = None, disabled: bool = False, help: str | None = None
) -> dict[str, Any]:
    """`disabled` and `help` for the widget that calls `operation_id`: `st.button(…, **control(…))`.

    A control the caller may use keeps its own `disabled` and `help`; one they may not is disabled
    with the reason as its help.
    """
    needed = needed_role(operation_id, at_least=at_least)
    if needed:
        return {"disabled": True, "help": refusal(needed)}
    return {"disabled": disabled, "help": help}


def may(operation_id: str, *, at_least: str | None = None) -> bool:
    """Whether the caller may call `operation_id` (to leave out what only explains a control)."""
    return needed_role(operation_id, at_least=at_least) is None


def _article(role: str) -> str:
    return "an" if role[0] in "aeiou" else "a"
