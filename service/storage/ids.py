"""Opaque, prefixed, time-ordered identifiers (`key_01j…`), so ids sort by creation and say their type."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from datetime import datetime

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
# Every pair of digits, so that an id is 13 lookups of 10 bits rather than 26 divisions.
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]


def new_id(
    prefix: str, *, at: datetime | None = None, randbits: Callable[[int], int] = secrets.randbits
) -> str:
    """48 bits of milliseconds (now, or `at` for a record dated in the past) then 80 random bits,
    in 26 base32 characters. The bits are from the system's random source, unless the id need not
    be unguessable (a request id can take `random.getrandbits`, a hundred times cheaper)."""
    seconds = at.timestamp() if at is not None else time.time()
    return _encode(prefix, (int(seconds * 1000) << 80) | randbits(80))


def first_id_at(prefix: str, at: datetime) -> str:
    """The smallest id new_id(prefix) can give at or after `at`: ids sort as their times do, so a
    time range is an id range, served by the index on the id."""
    return _encode(prefix, int(at.timestamp() * 1000) << 80)


def _encode(prefix: str, value: int) -> str:
    pairs = []
    for _ in range(13):
        pairs.append(_PAIRS[value & 1023])
        value >>= 10
    return f"{prefix}_{''.join(reversed(pairs))}"


def is_id(value: str, prefix: str) -> bool:
    """Whether `value` has the form new_id(prefix) gives."""
    return re.fullmatch(rf"{prefix}_[{_ALPHABET}]{{26}}", value) is not None
