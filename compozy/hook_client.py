"""The thin hook client: `compozy hook <client> <event>` forwarded to the running service over its Unix socket.

A hook runs on every prompt of someone's agent, so it must cost milliseconds, not the second that starting Django,
pydantic and the MCP SDK takes. This module uses the standard library only (no Django, no pydantic, nothing of
memory/ unless a failure must be logged): it posts the hook's stdin to `POST /api/hooks/<client>/<event>`, which
runs the same service as the in-process command (memory/services/hooks.py: `hook_run`), and prints exactly what
that service says the hook prints.

`forward` answers True when the service handled the hook (its failures included: they are logged by the service,
or here when the answer itself is unusable), False when no service answered (no socket, a stale socket file,
refused, a server without the route, a payload the socket cannot carry), in which case the caller runs the
in-process path. A service that accepted the request but did not answer in time is not retried in-process: the
request may still be running there, and doing it twice would be worse than once late.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

# Connecting to a live local socket is immediate; a longer wait means nothing useful answers there.
CONNECT_TIMEOUT_S = 0.5
# Claude Code's default hook timeout is 60 s; a compaction's checkpoint can take a provider call.
ANSWER_TIMEOUT_S = 55.0


def socket_path() -> Path:
    """$COMPOZY_HOME/run/compozy.sock, the socket `compozy serve` binds (compozy/config.py: compozy_home)."""
    home = Path(os.environ.get("COMPOZY_HOME") or Path.home() / ".compozy").expanduser()
    return home / "run" / "compozy.sock"


class UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket: connect within CONNECT_TIMEOUT_S, then wait up to `timeout` for the answer."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        sock.settimeout(self.timeout)
        self.sock = sock


class NotServed(Exception):
    """No service answered: run the hook in-process."""


def post(path: Path, route: str, body: bytes, *, timeout: float = ANSWER_TIMEOUT_S) -> tuple[int, bytes]:
    """(status, body) of one POST over the socket, or NotServed when nothing listens there."""
    connection = UnixConnection(path, timeout)
    try:
        try:
            connection.connect()
        except OSError as exc:  # FileNotFoundError, ConnectionRefusedError, a connect timeout
            raise NotServed(str(exc)) from None
        connection.request("POST", route, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _log(code: str, message: str, client: str, event: str) -> None:
    from memory.services.hooklog import log_failure  # plain Python: no Django

    log_failure(code=code, message=message, client=client, event=event)


def forward(client: str, event: str, raw: bytes) -> bool:
    path = socket_path()
    if not path.exists():
        return False
    try:
        stdin = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False  # JSON cannot carry it; the in-process path refuses it with the usual code
    body = json.dumps({"stdin": stdin, "cwd": os.getcwd()}, ensure_ascii=False).encode("utf-8")
    route = f"/api/hooks/{quote(client, safe='')}/{quote(event, safe='')}"
    try:
        status, answer = post(path, route, body)
    except NotServed:
        return False
    except OSError as exc:  # accepted, then timed out or dropped: the service may still be running it
        _log("hook.service_unanswered", f"{type(exc).__name__}: {exc}", client, event)
        return True
    try:
        document = json.loads(answer)
    except ValueError:
        document = None
    if status == 404 and isinstance(document, dict) and (document.get("details") or {}).get("reason") == "route":
        return False  # a service from before this route: the in-process path still works
    if status == 413:
        return False  # over the service's body limit: the in-process path reads any size
    if status != 200 or not isinstance(document, dict):
        code = document.get("code") if isinstance(document, dict) else None
        _log(str(code or "hook.internal"), f"the service answered {status}: {answer[:500]!r}", client, event)
        return True
    output = document.get("output")
    if output is not None:
        sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return True


def run_hook(args: list[str], in_process: Callable[[list[str]], None]) -> NoReturn:
    """`compozy hook <client> <event>` from the console script: forwarded to the running service, else run by
    `in_process` (which starts Django and the hook command). An agent hook must never break the agent that runs
    it, even when Django itself cannot start (an unusable COMPOZY_HOME, say): exit 0, print nothing, log the
    failure with a stable code."""
    try:
        if not (len(args) == 3 and _forwarded(args[1], args[2])):
            in_process(args)
    except BaseException as exc:  # noqa: BLE001
        named = [*args[1:3], "", ""]
        _log("hook.startup", f"{type(exc).__name__}: {exc}", named[0], named[1])
    sys.exit(0)


def _forwarded(client: str, event: str) -> bool:
    """The thin client first: when `compozy serve` runs, the hook costs a socket round trip instead of starting
    Django. When nothing answers, the stdin read here is handed to the in-process command unchanged."""
    raw = sys.stdin.buffer.read()
    if forward(client, event, raw):
        return True
    sys.stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
    return False
