"""Encryption at rest for secrets and provider credentials (Fernet: AES-128-CBC + HMAC-SHA256).

Several keys may be configured: the first encrypts, every one decrypts, so a key is rotated by
putting a new one first and re-encrypting (`python -m service rotate-secrets`). With no key
configured, one is generated into the data directory (mode 0600) on first use.
"""

from __future__ import annotations

import os
from functools import cached_property

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import inspect, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from service.settings import Settings

GENERATED_KEY_FILE = "encryption.key"
# Rows re-encrypted per round trip by `reencrypt_column`.
REENCRYPT_BATCH = 500


class DecryptionFailed(Exception):
    """A stored value that no configured key can open: a key was removed too early."""


class Cipher:
    def __init__(self, keys: list[str]) -> None:
        if not keys:
            raise ValueError("at least one encryption key is required")
        self._keys = keys

    @cached_property
    def _fernet(self) -> MultiFernet:
        return MultiFernet([Fernet(key.encode()) for key in self._keys])

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise DecryptionFailed("a stored secret cannot be decrypted with the configured keys") from exc

    def holds(self, token: str | None, plaintext: str) -> bool:
        """Whether `token` is `plaintext` encrypted: storing it again would change the row, not the value."""
        try:
            return token is not None and self.decrypt(token) == plaintext
        except DecryptionFailed:
            return False  # unreadable under the configured keys: a new value replaces it

    def rotate(self, token: str) -> str:
        """The same plaintext, encrypted under the first key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken as exc:
            raise DecryptionFailed("a stored secret cannot be decrypted with the configured keys") from exc


def cipher_for(settings: Settings) -> Cipher:
    return Cipher(settings.encryption_keys or [_generated_key(settings)])


def _generated_key(settings: Settings) -> str:
    path = settings.data_dir / GENERATED_KEY_FILE
    if not path.exists():
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip()  # another process generated it first
        with os.fdopen(descriptor, "w") as handle:
            handle.write(Fernet.generate_key().decode() + "\n")
    return path.read_text().strip()


def reencrypt_column(session: Session, *, cipher: Cipher, column: InstrumentedAttribute[str]) -> int:
    """Re-encrypt every value of an encrypted column under the cipher's first key; return how many.

    Each row is rewritten only if it still holds the ciphertext that was read, so a value written
    concurrently is never replaced by the older one read before it. Empty (NULL) values are skipped.
    """
    table = column.class_
    (primary_key,) = inspect(table).primary_key  # an id, or e.g. a signing key's environment_id
    rewritten = 0
    last_id = ""
    while True:
        batch = session.execute(
            select(primary_key, column)
            .where(primary_key > last_id, column.is_not(None))
            .order_by(primary_key)
            .limit(REENCRYPT_BATCH)
        ).all()
        if not batch:
            return rewritten
        for row_id, token in batch:
            result = session.execute(
                update(table)
                .where(primary_key == row_id, column == token)
                .values({column.key: cipher.rotate(token)})
                .execution_options(synchronize_session=False)
            )
            rewritten += result.rowcount
        last_id = batch[-1][0]
