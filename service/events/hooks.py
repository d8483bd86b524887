"""Hooks: what an area announces to the areas above it, which it may not import.

An area declares a hook where something happens that others must follow (an agent's draft
changed, a member was deactivated, an environment is about to go) and calls it there, in the
transaction of the change. An area above attaches a function where that function is defined
(`@agents.draft_changed.attach`); it runs in the same transaction, in the order attached, and may
refuse by raising or answer with what it knows (a call returns every answer). A hook with nothing
attached fails loudly instead of letting the change skip what follows it: the area that attaches
to it is named where the hook is declared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session

Answer = TypeVar("Answer")


class Hook(Generic[Answer]):
    def __init__(self, what: str, *, attached_by: str) -> None:
        self.what = what
        self.attached_by = attached_by
        self._attached: list[Callable[..., Answer]] = []

    def attach(self, function: Callable[..., Answer]) -> Callable[..., Answer]:
        """Run `function` whenever the hook is called (a decorator)."""
        self._attached.append(function)
        return function

    def __call__(self, session: Session, **facts: Any) -> list[Answer]:
        if not self._attached:
            raise RuntimeError(
                f"Nothing follows '{self.what}': {self.attached_by} attaches to it, and was not imported"
            )
        return [function(session, **facts) for function in self._attached]
