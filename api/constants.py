"""Client defaults, in one place so that tuning them is one edit."""

DEFAULT_TIMEOUT_SECONDS = 15.0
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_RETRIES = 3
INITIAL_RETRY_DELAY_SECONDS = 0.5
MAX_RETRY_DELAY_SECONDS = 8.0
# A server asking us to wait longer than this is treated as a failure rather than a pause.
MAX_RETRY_AFTER_SECONDS = 60.0
# Answers that say the service could not handle the request this time (not that it was wrong).
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Writes sent with an Idempotency-Key, so that retrying them never does anything twice.
KEYED_METHODS = frozenset({"POST", "PATCH"})
IDEMPOTENCY_HEADER = "Idempotency-Key"
USER_AGENT = "orgdeck-client/0.1"
# An Orgdeck API key starts with it and goes in X-API-Key; any other credential (an OpenID Connect
# token of a person or a pipeline) goes in `Authorization: Bearer`.
API_KEY_PREFIX = "odk_"
