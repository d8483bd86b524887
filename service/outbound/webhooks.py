"""Standard Webhooks signing, the one signer of every webhook the service sends (notifications and
deployment manifests), through the specification's reference implementation.

A message is signed as `v1,` + base64 HMAC-SHA256 of `webhook-id.webhook-timestamp.body`, keyed
with the base64 part of a `whsec_` secret. Several secrets give several space-separated signatures
in one `webhook-signature` header, which is how a receiver keeps working while a secret rotates: it
accepts the message when any signature matches its secret.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix, not a secret
SECRET_BYTES = 32


def new_secret() -> str:
    """A new signing secret, `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signature_headers(
    message_id: str, body: bytes, signing_secrets: Sequence[str], *, timestamp: int | None = None
) -> dict[str, str]:
    """The `webhook-id`, `webhook-timestamp` and `webhook-signature` headers of one message."""
    sent_at = int(time.time()) if timestamp is None else timestamp
    moment = datetime.fromtimestamp(sent_at, UTC)
    text = body.decode()
    signatures = [Webhook(secret).sign(message_id, moment, text) for secret in signing_secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(sent_at),
        "webhook-signature": " ".join(signatures),
    }
