"""Keep credentials out of every log line, whoever writes it.

An outbound URL can be a credential in itself (a Slack incoming webhook, a receiver's token in its
path or query), and libraries log the URLs they call (httpx at INFO: `HTTP Request: POST …`) or put
them into exception messages; a database error quotes the parameters of its statement, a
configuration's JSON among them. Every log record, from any logger, is rewritten when it is made: a
URL keeps its scheme and host, and its path, query and any user:password@ become `…`; the value of
every credential-named `key: value` or `key=value` becomes `[redacted]` (service/redaction/objects.py).
Tracebacks attached to a record are redacted the same way.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from service.redaction.objects import redacted_text

_URL = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)"  # https://
    r"(?:[^\s/@'\"<>]*@)?"  # user:password@, dropped
    r"(?P<host>[^\s/?#'\"<>]*)"  # host and port, kept
    r"[^\s'\"<>]*"  # path, query and fragment, dropped
)
_FORMATTER = logging.Formatter()
_installed = False


def redact_urls(text: str) -> str:
    """`text` with every URL cut to its scheme and host."""
    return _URL.sub(_host_only, text)


def _host_only(match: re.Match[str]) -> str:
    kept = match["scheme"] + match["host"]
    return kept if match.group(0) == kept else f"{kept}/…"


def install() -> None:
    """Redact every record made from now on in this process (idempotent)."""
    global _installed
    if _installed:
        return
    make_record = logging.getLogRecordFactory()

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it when the record is written
            return record
        shown = redacted_text(redact_urls(message))
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redacted_text(redact_urls(_FORMATTER.formatException(record.exc_info)))
        return record

    logging.setLogRecordFactory(redacting_factory)
    _installed = True
