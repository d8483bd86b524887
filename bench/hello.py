"""The reference point of every bench: the smallest FastAPI app, served exactly as `serve` serves ours.

python -m bench.hello --port 8001
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI

from service.runtime.cli import run_server
from service.settings import Settings

app = FastAPI()


@app.get("/")
async def hello() -> dict[str, str]:
    return {"message": "hello"}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hello", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    run_server(app, host="127.0.0.1", port=args.port, settings=Settings())


if __name__ == "__main__":
    main()
