"""Run the service in a background thread on a loopback port (the console's embedded mode, tests)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from service.app import create_app
from service.settings import Settings


class ServerThread:
    """uvicorn serving `create_app(settings)` in a daemon thread, on a socket bound before start."""

    def __init__(self, settings: Settings, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.settings = settings
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        self.app = create_app(settings)
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="orgdeck-service", daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL of the API, `/api` included."""
        return f"http://{self.host}:{self.port}/api"

    def start(self, timeout: float = 20.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("The embedded service did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
