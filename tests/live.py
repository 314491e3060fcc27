"""A live `compozy serve` for tests: loopback TCP on a free port and the Unix socket, its output in a log file,
stopped by its pid (serve stops its gunicorn and task-cluster children before it exits)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import COMPOZY

SIGNIN_LINE = re.compile(r"Sign in to the inspector \(one-time link, valid 24 h\): (\S+)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def service_env(home: Path) -> dict[str, str]:
    """The test process's environment without its own COMPOZY_* settings, pointed at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    return env


@dataclass
class LiveServe:
    process: subprocess.Popen
    port: int
    home: Path
    log: Path
    signin_link: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        return self.home / "run" / "compozy.sock"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_serve(home: Path, cwd: Path, log: Path, *, cluster: bool = False, timeout_s: float = 60.0) -> LiveServe:
    """Start `compozy serve` and wait until /healthz answers, the socket exists and the sign-in link is printed."""
    port = free_port()
    args = [COMPOZY, "serve", "--bind", f"127.0.0.1:{port}"] + ([] if cluster else ["--no-cluster"])
    with log.open("wb") as out:
        process = subprocess.Popen(args, cwd=cwd, env=service_env(home), stdout=out, stderr=subprocess.STDOUT)
    server = LiveServe(process, port, home, log, "")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"compozy serve exited with {process.returncode}:\n{server.output()}")
        found = SIGNIN_LINE.search(server.output())
        server.signin_link = found.group(1) if found else ""
        try:
            healthy = httpx.get(f"{server.base_url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            healthy = False
        if healthy and server.signin_link and server.socket_path.exists():
            return server
        time.sleep(0.2)
    stop_serve(server)
    raise RuntimeError(f"compozy serve did not come up on {server.base_url}:\n{server.output()}")


def stop_serve(server: LiveServe) -> int | None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
    try:
        return server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        return server.process.wait(timeout=10)
