"""Policy checks: CEL expressions over `{agent, environment, deployment}`, compiled once per source
text (a bounded cache) and run against one subject at a time.

The CEL library parses at compile time but does not type-check against a declared input, so a check
that answers something other than a boolean is found when it runs: against the policy's examples and
the reference input on save (a 400 naming `check`), and as an `error` outcome at deployment time."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from api.governance import PolicyExample
from service.errors import InvalidInput

# The `cel` package's __init__ imports its command line (typer, rich, prompt_toolkit, pygments: a
# tenth of a second of every start of the service) beside the evaluator, which is all the service
# uses. An empty `cel.cli` stands in for it, unless the real one is already imported.
sys.modules.setdefault("cel.cli", types.ModuleType("cel.cli"))
import cel  # noqa: E402

Outcome = Literal["pass", "fail", "error"]
CHECK_MAX_LENGTH = 10_000
# Distinct check texts kept compiled; an organization's policies are a few dozen, a fleet's a few hundred.
COMPILED_CACHE_SIZE = 1024
# How an error outcome says the check answered something other than true or false.
NOT_BOOLEAN = "the check answered"
_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


class CheckInvalid(InvalidInput):
    """A check that does not compile, or that answers something other than true or false."""

    def __init__(self, message: str, *, field: str = "check") -> None:
        super().__init__(f"{field}: {message}", field=field)


@dataclass(frozen=True)
class CompiledCheck:
    source: str
    program: Any


# An input converted once to the library's values, for running many checks on one subject (the
# conversion costs far more than a check's run).
CheckInput = dict[str, Any] | cel.Context


def prepared_input(input: dict[str, Any]) -> CheckInput:
    return cel.Context(input)


@dataclass(frozen=True)
class CheckResult:
    outcome: Outcome
    # Why it failed to evaluate (outcome error); None otherwise.
    error: str | None = None


PASSED, FAILED = CheckResult(outcome="pass"), CheckResult(outcome="fail")


def compile_check(source: str) -> CompiledCheck:
    """The compiled program of a check; CheckInvalid naming the line and column of a syntax error."""
    return _compiled(source.strip())


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compiled(source: str) -> CompiledCheck:
    if not source:
        raise CheckInvalid('must be a CEL expression, e.g. agent.model != "gpt-3.5-turbo"')
    try:
        program = cel.compile(source)
    except (ValueError, RuntimeError) as error:
        raise CheckInvalid(_located(str(error))) from None
    return CompiledCheck(source=source, program=program)


def run_check(compiled: CompiledCheck, input: CheckInput) -> CheckResult:
    """pass when the check answers true, fail when false, error when it cannot be evaluated (a missing
    field, a type mismatch) or answers something that is not a boolean."""
    try:
        value = compiled.program.execute(input)
    # The library raises KeyError, TypeError, RuntimeError or ValueError as evaluation fails.
    except Exception as error:
        return CheckResult(outcome="error", error=_evaluation_error(error))
    if value is True:
        return PASSED
    if value is False:
        return FAILED
    return CheckResult(outcome="error", error=f"{NOT_BOOLEAN} {type(value).__name__}, not a boolean")


def on_examples(check: str, examples: Iterable[PolicyExample]) -> Iterator[tuple[PolicyExample, CheckResult]]:
    """Each example with what the check gives on its input; CheckInvalid when it does not compile."""
    compiled = compile_check(check)
    for example in examples:
        yield example, run_check(compiled, example.input)


def evaluate_message(source: str | None, input: CheckInput) -> str | None:
    """A policy's message: plain text as written; text starting with `=` is a CEL string expression
    (e.g. `="model " + agent.model + " is not allowed"`), falling back to its source if it fails."""
    if source is None or not source.startswith("="):
        return source
    try:
        value = compile_check(source[1:]).program.execute(input)
    # A broken message never hides the violation it describes.
    except Exception:
        return source[1:].strip()
    return value if isinstance(value, str) else str(value)


def validate_message(source: str | None) -> None:
    """A message expression must compile (400 naming `message`); plain text always does."""
    if source is not None and source.startswith("="):
        try:
            compile_check(source[1:])
        except CheckInvalid as error:
            raise CheckInvalid(error.message.removeprefix("check: "), field="message") from None


def _located(text: str) -> str:
    """The library's parse error as "line L, column C: what" (the first error it reports)."""
    found = _POSITION.search(text)
    if found is None:
        return text.splitlines()[0] if text else "does not compile"
    line, column, what = found.groups()
    return f"line {line}, column {column}: {what.strip()}"


def _evaluation_error(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no field {error.args[0]!r} in the input"
    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
    return first_line.split(". ")[0]
