"""Property-based fuzzing of every operation in the live OpenAPI document, with schemathesis.

Valid and invalid requests are generated from each operation's schema (its coverage phase walks
every constraint's edges: the largest integers, empty and overlong text, wrong types, missing
fields) and sent to a real service over HTTP. It must never answer 5xx, every answer must match
what the document promises (status, content type, body schema, headers), and requests the schema
refuses must be refused. Hooks (tests/fuzz_hooks.py) draw, beside the schema's values, what the
schema cannot rule out: dates and moments at the calendar's edges in every date filter, and integers
of hundreds or thousands of digits in every number of a body. `--fuzz-examples` sets how many
examples each operation gets (a deeper run: `--fuzz-examples 500`); a failure names its seed, which
`--fuzz-seed` replays.

The service under fuzz has a database of its own and refuses private addresses, so the URLs the
fuzzer invents cannot reach anything the rest of the suite runs.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.runtime.bootstrap import create_org_with_key
from service.runtime.server import ServerThread
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import make_settings, scratch_database
from tests.processes import ROOT

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
    "unsupported_method",
    "allow_header_conformance",
)
# Every request carries the fuzzer's key in X-API-Key, so the security schemes' own headers are
# not generated: a made-up `Authorization` beside a valid X-API-Key is ignored by design (the key
# header wins), and its "invalid" values would read as accepted bad input. Credentials in every
# form are tested in test_auth.py.
CONFIG = """
headers = { "X-API-Key" = "${ORGDECK_FUZZ_KEY}" }

[generation]
with-security-parameters = false

[parameters]
orgSlug = "${ORGDECK_FUZZ_ORG}"

# Schemathesis's own list, and 413: a body over the service's limit is refused before it is read,
# whatever else is wrong with it, and that is a refusal too.
[checks.negative_data_rejection]
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"]
"""


@pytest.fixture(scope="module")
def fuzzed_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    with scratch_database(tmp_path_factory.mktemp("fuzz-db")) as database_url:
        db = Database(database_url)
        upgrade(db)
        settings = make_settings(
            tmp_path_factory.mktemp("fuzz-data"),
            database_url,
            outbound_allow_private=[],
            notification_timeout_seconds=2,
            provider_timeout_seconds=2,
        )
        server = ServerThread(settings).start()
        slug, key = create_org_with_key(
            db, slug=f"fuzz-{uuid.uuid4().hex[:8]}", name="Fuzz", key_name="fuzzer"
        )
        yield server.url, slug, key
        server.stop()
        db.dispose()


def test_every_operation_survives_fuzzing(fuzzed_service, tmp_path: Path, request: pytest.FixtureRequest):
    url, slug, key = fuzzed_service
    examples = request.config.getoption("--fuzz-examples")
    seed = request.config.getoption("--fuzz-seed") or random.randrange(2**32)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(tmp_path / "schemathesis.toml")),
        *("run", f"{url}/openapi.json", "--checks", ",".join(CHECKS)),
        *("--phases", "examples,coverage,fuzzing", "--max-examples", str(examples)),
        *("--seed", str(seed), "--workers", "1", "--no-color"),
        # Hypothesis gives up on an operation when it throws away too many of the values it drew
        # (some seeds draw mostly path ids a URL cannot carry, for GET /fleets/{fleetId}): that
        # says how the generator fares, nothing about the service, whose checks above all run.
        *("--suppress-health-check", "filter_too_much"),
    ]
    environment = {
        **os.environ,
        "ORGDECK_FUZZ_KEY": key,
        "ORGDECK_FUZZ_ORG": slug,
        "SCHEMATHESIS_HOOKS": str(ROOT / "tests" / "fuzz_hooks.py"),
    }
    run = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900)
    report = _failures(run.stdout)[:20000] + run.stderr[-5000:]
    assert run.returncode == 0, f"fuzzing with seed {seed} found failures:\n{report}"
    assert "Tested: " in run.stdout and "generated" in run.stdout, report


def _failures(report: str) -> str:
    """The report's failures with how to reproduce each, without the advice that follows them."""
    start, end = report.find("=== FAILURES ==="), report.find("=== WARNINGS ===")
    if start < 0:
        return report[-20000:]
    summary = report.find("=== SUMMARY ===")
    return report[start : end if end > start else None] + (report[summary:] if summary > start else "")
