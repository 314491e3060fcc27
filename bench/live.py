"""A live `compozy serve` for tests and benchmarks: loopback TCP on a free port and the Unix socket, its output in
a log file, stopped by pid (serve stops its gunicorn and task-cluster children; any of them still alive after it
exits is ended by the pid recorded at start).

This module is the one implementation for both: the tests import it as `bench.live`, the benchmarks (which run
with bench/ on their path) as `live`. It has no import-time effects and imports nothing from tests/ (tests.conftest
points COMPOZY_HOME elsewhere) nor from the product.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# The console script of the venv running this process (tests.conftest.COMPOZY is the same path).
COMPOZY = str(Path(sys.executable).parent / "compozy")
SIGNIN_LINE = re.compile(r"Sign in to the inspector \(one-time link, valid 24 h\): (\S+)")


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (loopback only)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def service_env(home: Path) -> dict[str, str]:
    """This process's environment without its own COMPOZY_* settings, pointed at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    return env


def _descendants(pid: int) -> list[int]:
    """The pids below `pid` now, from /proc (Linux), depth first."""
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = [int(part) for part in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            found.append(child)
            found.extend(_descendants(child))
    return found


@dataclass
class LiveServe:
    process: subprocess.Popen
    port: int
    home: Path
    log: Path
    signin_link: str = ""
    children: list[int] = field(default_factory=list)  # pids started by serve, recorded once it answered

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        return self.home / "run" / "compozy.sock"

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    def output(self) -> str:
        try:
            return self.log.read_text("utf-8", "replace")
        except OSError:
            return ""


def start_serve(home: Path, cwd: Path, log: Path, *, cluster: bool = False, timeout_s: float = 60.0,
                env: dict[str, str] | None = None) -> LiveServe:
    """Start `compozy serve` (cwd, COMPOZY_HOME = home and no other COMPOZY_* variable) and wait until /healthz
    answers over TCP, the socket exists and the sign-in link is printed. Its stdout and stderr go to `log`. `env`
    adds variables to the service's environment (the browser tests give it a time zone)."""
    port = free_port()
    args = [COMPOZY, "serve", "--bind", f"127.0.0.1:{port}"] + ([] if cluster else ["--no-cluster"])
    service = {**service_env(home), **(env or {})}
    service.pop("DJANGO_SETTINGS_MODULE", None)  # a benchmark sets it for itself; serve chooses its own
    with log.open("wb") as out:
        process = subprocess.Popen(args, cwd=cwd, env=service, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = LiveServe(process, port, home, log)
    deadline = time.monotonic() + timeout_s
    try:
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
                server.children = _descendants(process.pid)
                return server
            time.sleep(0.2)
        raise RuntimeError(f"compozy serve did not come up on {server.base_url}:\n{server.output()}")
    except BaseException:
        stop_serve(server)
        raise


def stop_serve(server: LiveServe, *, timeout_s: float = 30.0) -> int | None:
    """SIGTERM to the serve process (it stops its children), then SIGKILL by pid to whatever it started that is
    still alive. Returns the serve process's exit code."""
    process = server.process
    pids = list(dict.fromkeys([*server.children, *_descendants(process.pid)]))
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    for pid in pids:
        # Only pids recorded as this server's descendants, and only while they still look like ours.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"gunicorn" in cmdline or b"compozy" in cmdline or b"qcluster" in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return process.returncode


@contextlib.contextmanager
def running_cluster(cwd: Path, env: dict[str, str], log: Path) -> Iterator[Callable[[], None]]:
    """A django-q2 `qcluster` alone (no serve) in its own process group, so its forked workers are stopped with it,
    by its id: SIGTERM, then SIGKILL if it has not stopped. Yields a check that fails with its log if it died."""
    manage = Path(__file__).resolve().parent.parent / "manage.py"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, str(manage), "qcluster"], cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def alive() -> None:
        if process.poll() is not None:
            raise AssertionError(f"qcluster exited with {process.returncode}:\n{log.read_text('utf-8', 'replace')}")

    try:
        yield alive
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
