"""A live `compozy serve` (gunicorn on a loopback port and the Unix socket) per test module."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import COMPOZY


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    home: Path
    workspace: Path
    port: int
    process: subprocess.Popen

    @property
    def socket_path(self) -> Path:
        return self.home / "run" / "compozy.sock"

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    def tcp(self, token: str | None = "default") -> httpx.Client:
        headers = {}
        if token == "default":
            token = self.token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=30)

    def uds(self) -> httpx.Client:
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket_path)), base_url="http://localhost",
                            timeout=30)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
        env["COMPOZY_HOME"] = str(self.home)
        return env


def start_server(home: Path, workspace: Path) -> Server:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    process = subprocess.Popen([COMPOZY, "serve", "--bind", f"127.0.0.1:{port}", "--no-cluster"], cwd=workspace,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server(home, workspace, port, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if server.socket_path.exists() and httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("compozy serve did not start")


def stop_server(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()


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
