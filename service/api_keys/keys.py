"""The key format: `odk_` + 32 random base62 characters + a 6-character checksum.

The fixed prefix lets secret scanners recognise leaked keys; the checksum lets us refuse a mistyped
or truncated key without a database lookup.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib

KEY_PREFIX = "odk_"
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_RANDOM_LENGTH = 32
_CHECKSUM_LENGTH = 6
_KEY_PATTERN = re.compile(rf"^{KEY_PREFIX}[0-9A-Za-z]{{{_RANDOM_LENGTH + _CHECKSUM_LENGTH}}}$")
DISPLAY_PREFIX_LENGTH = len(KEY_PREFIX) + 8


def _checksum(body: str) -> str:
    value = zlib.crc32(body.encode())
    digits = []
    for _ in range(_CHECKSUM_LENGTH):
        value, digit = divmod(value, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits))


def generate_key() -> str:
    body = "".join(secrets.choice(_BASE62) for _ in range(_RANDOM_LENGTH))
    return f"{KEY_PREFIX}{body}{_checksum(body)}"


def is_well_formed(key: str) -> bool:
    if not _KEY_PATTERN.match(key):
        return False
    body = key[len(KEY_PREFIX) : len(KEY_PREFIX) + _RANDOM_LENGTH]
    return secrets.compare_digest(_checksum(body), key[-_CHECKSUM_LENGTH:])


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_PREFIX_LENGTH]
