"""The floor under `GET /api/api-keys`: a minimal FastAPI app doing what it does and nothing else.

python -m bench.anchor --port 8002 --database-url sqlite:////path/to/orgdeck.db

One sync route: hash the presented key, find it (active, with its organization), read the
organization's active keys and answer them as JSON. SQLAlchemy Core with statements built once and
a pool sized like the service's, served through the same uvicorn call as `serve`. No middleware, no
dependencies, no response model: the fastest honest version of the same work, on the same database.
"""

from __future__ import annotations

import argparse
import hashlib
import json

from fastapi import FastAPI, Header, Query
from fastapi.responses import Response
from sqlalchemy import bindparam, create_engine, text

from service.runtime.cli import run_server
from service.settings import Settings

KEY_QUERY = text(
    "SELECT api_keys.org_id, organizations.slug FROM api_keys "
    "JOIN organizations ON organizations.id = api_keys.org_id "
    "WHERE api_keys.key_hash = :key_hash AND api_keys.revoked_at IS NULL"
)
KEYS_QUERY = text(
    "SELECT id, name, prefix, role, created_at, last_used_at FROM api_keys "
    "WHERE org_id = :org_id AND revoked_at IS NULL ORDER BY created_at DESC, id DESC"
).bindparams(bindparam("org_id"))


def make_app(database_url: str) -> FastAPI:
    engine = create_engine(database_url, pool_size=8, max_overflow=8)
    app = FastAPI()

    @app.get("/api/api-keys")
    def list_keys(org_slug: str = Query(alias="orgSlug"), x_api_key: str = Header()) -> Response:
        with engine.connect() as connection:
            found = connection.execute(
                KEY_QUERY, {"key_hash": hashlib.sha256(x_api_key.encode()).hexdigest()}
            ).first()
            if found is None or found.slug != org_slug:
                return Response('{"message":"no"}', status_code=401, media_type="application/json")
            rows = connection.execute(KEYS_QUERY, {"org_id": found.org_id}).mappings().all()
        items = [
            {**row, "created_at": str(row["created_at"]), "last_used_at": str(row["last_used_at"])}
            for row in rows
        ]
        return Response(json.dumps({"items": items, "total": len(items)}), media_type="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.anchor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    settings = Settings(database_url=args.database_url)
    run_server(make_app(settings.resolved_database_url), host="127.0.0.1", port=args.port, settings=settings)


if __name__ == "__main__":
    main()
