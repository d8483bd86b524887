"""Small presentation helpers shared by pages."""

from __future__ import annotations

from datetime import UTC, datetime


def ago(moment: datetime | None, *, never: str = "never") -> str:
    """'3 min ago', '2 d ago': how people read recent times."""
    if moment is None:
        return never
    seconds = (datetime.now(UTC) - moment).total_seconds()
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"
