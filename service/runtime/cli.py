"""`python -m service …`: serve, migrate, create-org, rotate-secrets, backup, restore."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from service.errors import ServiceError
from service.http.requestid import current_request_id
from service.observability import logs
from service.redaction import logs as logredact
from service.settings import Settings
from service.storage.db import Database

logger = logging.getLogger("orgdeck.migrate")


def _database(settings: Settings) -> Database:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Database(settings.resolved_database_url)


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from service.storage.migrate import Standing, schema_state, upgrade

    db = _database(settings)
    try:
        if getattr(args, "check", False):
            state = schema_state(db)
            print(f"Database is {state.standing.value}: {state.describe()}.", file=sys.stderr)
            return 0 if state.standing is Standing.AT_HEAD else 1
        upgrade(db)
    finally:
        db.dispose()
    logger.info("Database is at the newest schema.")
    return 0


def run_server(
    app: Any,
    *,
    host: str,
    port: int,
    settings: Settings,
    proxy_headers: bool = False,
) -> None:
    """Serve an ASGI app the way `serve` does (benches serve their reference app through this too)."""
    import uvicorn

    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        # uvicorn's records go to the root logger's one handler, in ORGDECK_LOG_FORMAT (main).
        log_config=None,
        # The service writes its own access line (service.http.observation), with the request's id.
        access_log=False,
        proxy_headers=proxy_headers,
        forwarded_allow_ips="*" if proxy_headers else None,
    )


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from service.app import create_app

    cmd_migrate(settings, args)
    if args.access_log:
        settings = settings.model_copy(update={"access_log": True})
    run_server(
        create_app(settings),
        host=args.host,
        port=args.port,
        settings=settings,
        proxy_headers=args.proxy_headers,
    )
    return 0


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    """Run the background worker alone (with ORGDECK_RUN_WORKER=false on the serving processes)."""
    from service.observability import tracing
    from service.worker import Worker

    cmd_migrate(settings, args)
    db = _database(settings)
    tracing.instrument_engine(db.engine)
    worker = Worker(db, settings)
    try:
        worker.run()
    except KeyboardInterrupt:
        worker.stop()
    return 0


def cmd_create_org(settings: Settings, args: argparse.Namespace) -> int:
    from service.runtime.bootstrap import create_org_with_key
    from service.storage.migrate import upgrade

    db = _database(settings)
    upgrade(db)
    try:
        org_slug, key = create_org_with_key(
            db, slug=args.slug, name=args.name, key_name=args.key_name, admin_email=args.email
        )
    except ServiceError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        db.dispose()
    print(json.dumps({"orgSlug": org_slug, "apiKey": key}))
    return 0


def cmd_rotate_secrets(settings: Settings, _args: argparse.Namespace) -> int:
    from service.changes.service import rotate_sealed
    from service.deployments.service import rotate_signing_keys
    from service.environments.service import rotate_secrets
    from service.idempotency.service import rotate_answers
    from service.notifications.service import rotate_channel_secrets
    from service.providers.service import rotate_provider_keys
    from service.storage.crypto import DecryptionFailed, cipher_for
    from service.storage.migrate import upgrade

    db = _database(settings)
    upgrade(db)
    try:
        # One transaction: a value no key opens leaves every column as it was.
        with db.session(write=True) as session:
            cipher = cipher_for(settings)
            secrets = rotate_secrets(session, cipher=cipher)
            provider_keys = rotate_provider_keys(session, cipher)
            channel_secrets = rotate_channel_secrets(session, cipher=cipher)
            signing_keys = rotate_signing_keys(session, cipher=cipher)
            sealed = rotate_sealed(session, cipher=cipher)
            answers = rotate_answers(session, cipher=cipher)
    except DecryptionFailed as exc:
        print(f"error: {exc}; list every key still in use in ORGDECK_ENCRYPTION_KEYS", file=sys.stderr)
        return 1
    finally:
        db.dispose()
    print(
        f"Re-encrypted {secrets} secrets, {provider_keys} provider keys, {channel_secrets} channel "
        f"secrets, {signing_keys} deployment signing keys, {sealed} values sealed in change requests "
        f"and {answers} stored idempotent answers under the first configured key."
    )
    return 0


def cmd_backup(settings: Settings, args: argparse.Namespace) -> int:
    from service.storage import backup

    database = backup.sqlite_path(settings.resolved_database_url)
    if database is None:
        print(backup.POSTGRESQL_INSTRUCTIONS, file=sys.stderr)
        return 2
    try:
        backup.backup(database, args.path)
    except backup.BackupRefused as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    print(f"Backed up {database} to {args.path}.", file=sys.stderr)
    if not settings.encryption_keys:
        print(
            f"Note: its secrets are encrypted with the generated key {settings.data_dir / 'encryption.key'}; "
            "keep a copy of that key apart from the backup (a restore needs it).",
            file=sys.stderr,
        )
    return 0


def cmd_restore(settings: Settings, args: argparse.Namespace) -> int:
    from service.storage import backup

    database = backup.sqlite_path(settings.resolved_database_url)
    if database is None:
        print(backup.POSTGRESQL_INSTRUCTIONS, file=sys.stderr)
        return 2
    try:
        backup.restore(args.path, database, force=args.force)
    except backup.BackupRefused as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    print(
        f"Restored {args.path} to {database}; serve it with the same ORGDECK_ENCRYPTION_KEYS "
        "(`serve` migrates it to this code's schema first).",
        file=sys.stderr,
    )
    return 0


def cmd_demo(settings: Settings, _args: argparse.Namespace) -> int:
    from service.runtime.embedded import start

    # The seeding's own requests are not news in the console's terminal.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # SIGTERM ends it as its standard input closing does: the service stopped, its worker first.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    embedded = start(settings)
    try:
        print(json.dumps({"url": embedded.url, "apiKey": embedded.api_key}), flush=True)
        # Whoever reads that line may stop reading: nothing else may block on a full pipe.
        sys.stdout = sys.stderr
        sys.stdin.read()
    finally:
        # Before the interpreter tears down thread pools: a notification sender still cycling then
        # would print a traceback ("cannot schedule new futures after shutdown").
        embedded.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m service",
        description="Orgdeck Organization Management Service. Settings come from ORGDECK_* variables.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="apply migrations, then serve the API")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.add_argument(
        "--proxy-headers", action="store_true", help="trust X-Forwarded-For from a load balancer in front"
    )
    serve.add_argument(
        "--access-log", action="store_true", help="log a line for every request (as ORGDECK_ACCESS_LOG=true)"
    )
    serve.set_defaults(handler=cmd_serve)

    worker = commands.add_parser("worker", help="run the background worker (jobs, deliveries, checks)")
    worker.set_defaults(handler=cmd_worker)

    migrate = commands.add_parser("migrate", help="bring the database schema up to date")
    migrate.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 0 when the database is at this code's head, 1 when it is behind "
        "or newer than the code",
    )
    migrate.set_defaults(handler=cmd_migrate)

    create_org = commands.add_parser(
        "create-org", help="create an organization and its first API key; prints one JSON line"
    )
    create_org.add_argument("slug", help="the organization's slug (lowercase letters, digits, hyphens)")
    create_org.add_argument("--name", help="display name (default: the slug)")
    create_org.add_argument("--key-name", default="admin", help="name of the first key (default: admin)")
    create_org.add_argument(
        "--email", help="the first member, an admin, who owns the key (without it: an admin service key)"
    )
    create_org.set_defaults(handler=cmd_create_org)

    rotate = commands.add_parser(
        "rotate-secrets",
        help="re-encrypt every stored secret under the first key of ORGDECK_ENCRYPTION_KEYS",
        description="Re-encrypt every stored secret under the first configured key, so that older keys "
        "(still listed after it) can then be removed. Safe to run while the service is serving.",
    )
    rotate.set_defaults(handler=cmd_rotate_secrets)

    demo = commands.add_parser(
        "demo",
        help="serve a demo organization on a free loopback port (the console's embedded service)",
        description="Migrate, create the organization `demo` and its admin key (kept in the data "
        "directory) and fill it with demo data on first run, then serve on a free loopback port with "
        'the worker. Prints one JSON line, {"url", "apiKey"}, once it serves, and stops when its '
        "standard input closes.",
    )
    demo.set_defaults(handler=cmd_demo)

    backup = commands.add_parser(
        "backup",
        help="copy the SQLite database to PATH, consistent while the service serves",
        description="Copy the SQLite database (ORGDECK_DATA_DIR or ORGDECK_DATABASE_URL) to the new file "
        "PATH with SQLite's online backup API: the database as it was at one moment, taken while the "
        "service goes on serving. PostgreSQL: prints the pg_dump command to use instead (exit 2).",
    )
    backup.add_argument("path", type=Path, help="the backup file to write (never overwritten)")
    backup.set_defaults(handler=cmd_backup)

    restore = commands.add_parser(
        "restore",
        help="restore a backup into the configured (new) data directory",
        description="Copy the backup at PATH to the configured SQLite database, normally in a new "
        "ORGDECK_DATA_DIR. Refuses when a database is already there, unless --force (stop its service "
        "first). PostgreSQL: prints the pg_restore command to use instead (exit 2).",
    )
    restore.add_argument("path", type=Path, help="a file written by `backup`")
    restore.add_argument(
        "--force", action="store_true", help="replace the database already there (its service stopped)"
    )
    restore.set_defaults(handler=cmd_restore)
    return parser


# Commands whose app's lifespan turns the collector on (service.app).
SERVED_APPS = {cmd_serve, cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    from service.storage.migrate import SchemaNewerThanCode

    args = build_parser().parse_args(argv)
    if args.handler not in SERVED_APPS:
        gc.enable()  # held through the imports (service/__main__.py); a served app turns it on
    settings = Settings()
    logs.configure(settings.log_format, settings.log_level, current_request_id.get)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logredact.install()
    try:
        return args.handler(settings, args)
    except SchemaNewerThanCode as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
