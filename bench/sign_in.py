"""What signing in with OpenID Connect tokens costs a request, against an API key, in one run.

    .venv/bin/python bench/sign_in.py                   # fresh SQLite; needs `npm ci --prefix tests/oidc`
    .venv/bin/python -m bench.sign_in --database-url postgresql://postgres@127.0.0.1:5432/bench

Serves the service with the test suite's OpenID Connect provider (tests/oidc) as its identity
provider and measures GET /api/whoami three ways: with an API key, with a member's ID token (its
signature verified, its member, organization and sign-in session looked up at every request), and
with a CI job's token (its trusted workload looked up and its conditions matched). Prints
requests/s, p50, p99 and the ratios against the key.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

if not __package__:  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.common import (
    LEGEND,
    RATIO_HEADERS,
    SERIES_HEADERS,
    BenchError,
    Target,
    add_arguments,
    describe_setup,
    format_table,
    load_settings,
    measure,
    orgdeck_service,
    run,
    scratch_directory,
    series_rows,
)
from tests.oidc_provider import CI_AUDIENCE, CONSOLE_CLIENT, missing_part, running_provider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/sign_in.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    load = load_settings(args)
    if (reason := missing_part()) is not None:
        raise BenchError(f"The OpenID Connect provider is unavailable: {reason}")
    print(f"Sign-in bench: {describe_setup(load, args.database_url)}", file=sys.stderr)
    with scratch_directory() as workdir, running_provider() as provider:
        settings = {
            "ORGDECK_OIDC_ISSUER": provider.issuer,
            "ORGDECK_OIDC_AUDIENCE": CONSOLE_CLIENT,
            "ORGDECK_OUTBOUND_ALLOW_PRIVATE": "127.0.0.1",
        }
        with orgdeck_service(workdir, database_url=args.database_url, env=settings) as service:
            org = service.create_org()
            email = f"dana-{uuid.uuid4().hex[:8]}@acme.test"
            provider.change_account("dana", email=email)
            with httpx.Client(base_url=service.url("/api"), headers=org.headers, timeout=30) as api:
                member = {"orgSlug": org.slug, "email": email, "name": "Dana", "role": "operator"}
                api.post("/members", json=member).raise_for_status()
                workload = {
                    "orgSlug": org.slug,
                    "name": "ci",
                    "issuer": provider.issuer,
                    "audience": CI_AUDIENCE,
                    "conditions": [{"claim": "repository", "equals": "acme/agents"}],
                    "role": "operator",
                }
                api.post("/workload-identities", json=workload).raise_for_status()
            person = {"Authorization": f"Bearer {provider.id_token('dana')}"}
            job = {"Authorization": f"Bearer {provider.job_token('ci-main')}"}
            targets = [
                Target("GET /api/whoami (API key)", service, "/api/whoami", headers=org.headers),
                Target("GET /api/whoami (member's ID token)", service, "/api/whoami", headers=person),
                Target("GET /api/whoami (CI job's token)", service, "/api/whoami", headers=job),
            ]
            series = measure(targets, load)
    print()
    print(describe_setup(load, args.database_url) + "; ratios against the API key")
    print()
    print(format_table(SERIES_HEADERS + RATIO_HEADERS, series_rows(series, reference=series[0])))
    print()
    print(LEGEND)
    return 0


if __name__ == "__main__":
    run(main)
