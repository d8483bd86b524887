"""`python -m service …`: serve, migrate, create-org."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from service.db import Database
from service.errors import ServiceError
from service.settings import Settings


def _database(settings: Settings) -> Database:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Database(settings.resolved_database_url)


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    from service.migrate import upgrade

    db = _database(settings)
    upgrade(db)
    db.dispose()
    print("Database is at the newest schema.", file=sys.stderr)
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from service.app import create_app

    cmd_migrate(settings, args)
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=settings.log_level.lower(),
        proxy_headers=args.proxy_headers,
        forwarded_allow_ips="*" if args.proxy_headers else None,
    )
    return 0


def cmd_create_org(settings: Settings, args: argparse.Namespace) -> int:
    from service.bootstrap import create_org_with_key
    from service.migrate import upgrade

    db = _database(settings)
    upgrade(db)
    try:
        org_slug, key = create_org_with_key(db, slug=args.slug, name=args.name, key_name=args.key_name)
    except ServiceError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        db.dispose()
    print(json.dumps({"orgSlug": org_slug, "apiKey": key}))
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
    serve.set_defaults(handler=cmd_serve)

    migrate = commands.add_parser("migrate", help="bring the database schema up to date")
    migrate.set_defaults(handler=cmd_migrate)

    create_org = commands.add_parser(
        "create-org", help="create an organization and its first API key; prints one JSON line"
    )
    create_org.add_argument("slug", help="the organization's slug (lowercase letters, digits, hyphens)")
    create_org.add_argument("--name", help="display name (default: the slug)")
    create_org.add_argument("--key-name", default="admin", help="name of the first key (default: admin)")
    create_org.set_defaults(handler=cmd_create_org)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return args.handler(settings, args)
