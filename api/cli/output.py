"""How the command line speaks: JSON for machines, tables and diffs for people, errors on stderr
(on stdout as JSON under `--json`), and exit codes a pipeline can branch on."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from api.errors import ApiError

EXIT_OK = 0
EXIT_FAILURE = 1  # also: a preview with changes, drift found, a job that failed
EXIT_USAGE = 2  # also: `deploy --wait` timed out
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_POLICY_DENIED = 5  # `deploy preview --exit-code`: a deny policy would refuse the deployment

# Off a terminal (a CI log) nothing is measured: tables get room enough not to wrap.
_LOG_WIDTH = 200


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, highlight=False, width=None if stream.isatty() else _LOG_WIDTH)


def out() -> Console:
    return _console(stderr=False)


def err() -> Console:
    return _console(stderr=True)


def wire(value: BaseModel | list[BaseModel] | dict[str, Any]) -> Any:
    """A record as the API sends it: camelCase JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [wire(item) for item in value]
    return value


def print_json(value: BaseModel | list[BaseModel] | dict[str, Any]) -> None:
    click.echo(json.dumps(wire(value), indent=2, ensure_ascii=False))


def table(*columns: str) -> Table:
    return Table(*columns, box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))


def shown(value: Any) -> str:
    """A value in a diff or a table: text as it is, anything else as compact JSON, nothing as a dash."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# The `code` of an error the command line finds itself, by its exit code (the service's own errors
# carry the service's code).
LOCAL_ERROR_CODES = {
    EXIT_FAILURE: "failed",
    EXIT_USAGE: "usage",
    EXIT_AUTH: "unauthorized",
    EXIT_NOT_FOUND: "not_found",
}


class Failure(click.ClickException):
    """Why a command stopped: a message, a stable code for programs, and the exit code."""

    def __init__(self, message: str, exit_code: int, code: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code or LOCAL_ERROR_CODES[exit_code]

    @classmethod
    def of(cls, error: ApiError) -> Failure:
        return cls(error.message, exit_code_for(error), error.code)

    def show(self, file: Any = None) -> None:
        err().print(f"[bold red]Error:[/] {escape(self.message)} [dim]({self.code})[/]", soft_wrap=True)

    def show_json(self) -> None:
        print_json({"error": {"code": self.code, "message": self.message}})


def exit_code_for(error: ApiError) -> int:
    if error.status in {401, 403}:
        return EXIT_AUTH
    if error.status == 404:
        return EXIT_NOT_FOUND
    return EXIT_FAILURE
