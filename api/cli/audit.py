"""`orgdeck audit export`: the audit trail as NDJSON, for keeping before retention prunes it."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from api.cli.context import json_option, with_client
from api.cli.output import err
from api.client import OrgdeckClient


class Moment(click.ParamType):
    """An RFC 3339 time (`2026-01-01T00:00:00Z`) or a date (its UTC midnight); no zone means UTC."""

    name = "TIME"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a date or an RFC 3339 time", param, ctx)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.group(name="audit", epilog="\b\nExample:\n  orgdeck audit export --from 2026-01-01 > audit.ndjson")
def group() -> None:
    """The audit trail: export it."""


@group.command(
    epilog="""\b
Examples:
  orgdeck audit export > audit.ndjson
  orgdeck audit export --from 2026-01-01 --to 2026-02-01 | gzip > audit-2026-01.ndjson.gz

\b
Needs an admin key. The export is on record; once it has run to its end, retention
(ORGDECK_RETENTION_AUDIT_EVENTS_DAYS) may prune the events it covered.
"""
)
@click.option(
    "--from", "start", type=Moment(), help="The first moment exported (inclusive) [default: the first event]."
)
@click.option("--to", "end", type=Moment(), help="The end (exclusive) [default and at most: a minute ago].")
@json_option
@with_client
def export(client: OrgdeckClient, start: datetime | None, end: datetime | None, as_json: bool) -> None:
    """Every audit event of the range, oldest first, one JSON object per line on stdout."""
    count = 0
    for line in client.audit.export(start=start, end=end):
        sys.stdout.write(line + "\n")
        count += 1
    sys.stdout.flush()
    if not as_json:
        err().print(f"Exported {count} audit events.")
