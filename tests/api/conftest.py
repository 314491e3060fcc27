"""A live `compozy serve` (gunicorn on a loopback port and the Unix socket) per test module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.live import LiveServe, service_env, start_serve, stop_serve


@dataclass
class Server:
    live: LiveServe
    workspace: Path

    @property
    def home(self) -> Path:
        return self.live.home

    @property
    def port(self) -> int:
        return self.live.port

    @property
    def socket_path(self) -> Path:
        return self.live.socket_path

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    def tcp(self, token: str | None = "default") -> httpx.Client:
        headers = {}
        if token == "default":
            token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.live.base_url, headers=headers, timeout=30)

    def uds(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket_path)), base_url="http://localhost",
                            timeout=30)

    def env(self) -> dict[str, str]:
        return service_env(self.home)


def start_server(home: Path, workspace: Path) -> Server:
    return Server(start_serve(home, workspace, home.parent / f"serve-{home.name}.log"), workspace)


def stop_server(server: Server) -> None:
    stop_serve(server.live)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("api")
    home = base / "home"
    workspace = base / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    running = start_server(home, workspace)
    yield running
    stop_server(running)
