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


def duration(seconds: float | None, *, none: str = "—") -> str:
    """'45 s', '3 min 20 s', '2 h 5 min', '3 d 4 h': two units at most, the larger first."""
    if seconds is None:
        return none
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    units = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))
    whole = int(seconds)
    for i, (size, unit) in enumerate(units[:-1]):
        if whole >= size:
            smaller, small_unit = units[i + 1]
            rest = (whole % size) // smaller
            return f"{whole // size} {unit}" + (f" {rest} {small_unit}" if rest else "")
    return f"{whole} s"


def short_duration(seconds: float | None, *, none: str = "—") -> str:
    """'45 s', '24.6 min', '3.2 h', '1.5 d': one unit, for tiles where space is short."""
    if seconds is None:
        return none
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
