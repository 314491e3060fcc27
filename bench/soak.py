"""The soak: every surface writing and reading one home at once, for 5 minutes by default.

    .venv/bin/python bench/soak.py                 # 300 s
    .venv/bin/python bench/soak.py --seconds 20

One `compozy serve` (gunicorn on a loopback port and the Unix socket, with its django-q2 task cluster) on a fresh
home and workspace (a git checkout). Then, at the same time, one client loop per surface:
- cli:    a `compozy memory` process per call: write, then list or search
- tcp:    HTTP over loopback with the bearer token: write, list, search, edit of its own memory
- socket: the same over the 0600 Unix socket
- mcp:    one `compozy mcp` process over stdio: propose (add), list, search
- reindex: a reindex job queued for the task cluster (memory_jobs + django-q2), waited for, again and again
Each loop writes memories whose words are its own, so no two surfaces' writes are related by the rules.

An error is any answer that is not a success: a non-2xx status, a CLI exit code other than 0, an MCP tool error,
a failed job, an exception in the client. The script prints one JSON document: per surface the calls, errors,
p50/p95/max latency, and the same surface's p50 measured alone before the load (the floor); the first errors in
full; and the final check: health (from a fresh CLI process, which also replays) and the invariants of
tests/crash/invariants.py (disk = catalog = applied decisions, no temp files, MEMORY.md exact, every file parses).
Target: 0 errors, 0 violations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# COMPOZY comes from live, not tests.conftest: importing conftest points COMPOZY_HOME at a temp dir and starts
# Django there, so the bench's own calls (the reindex jobs) would go to a database the server never reads.
import common  # noqa: E402  (puts the repository root on the path for tests.crash)
import httpx  # noqa: E402
from live import COMPOZY, service_env, start_serve, stop_serve  # noqa: E402

from tests.crash.invariants import violations  # noqa: E402
from tests.crash.writer import Vocabulary  # noqa: E402

ALONE_CALLS = 3  # the floor takes at least this many calls of each surface, however slow its start


def going(until: float, alone: bool, done: int) -> bool:
    return time.perf_counter() < until or (alone and done < ALONE_CALLS)


@dataclass
class Surface:
    name: str
    latencies: list[float] = field(default_factory=list)
    alone: list[float] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, started: float, ok: bool, what: str, detail: Any = None, *, alone: bool = False) -> None:
        elapsed = time.perf_counter() - started
        with self.lock:
            self.calls += not alone
            (self.alone if alone else self.latencies).append(elapsed)
            if not ok:
                self.errors.append({"surface": self.name, "call": what, "detail": str(detail)[:400]})

    def report(self) -> dict[str, Any]:
        ms = sorted(1000 * x for x in self.latencies)

        def pct(p: float) -> float | None:
            return round(ms[min(len(ms) - 1, int(p * len(ms)))], 1) if ms else None

        return {"calls": self.calls, "errors": len(self.errors), "p50_ms": pct(0.50), "p95_ms": pct(0.95),
                "max_ms": round(ms[-1], 1) if ms else None,
                "alone_p50_ms": round(1000 * statistics.median(self.alone), 1) if self.alone else None}


def fact(vocabulary: Vocabulary, memory_type: str = "project") -> dict[str, str]:
    w = [vocabulary.word() for _ in range(6)]
    return {"type": memory_type, "name": f"{w[0].capitalize()} {w[1].capitalize()}",
            "description": f"The {w[2]} of {w[3]}", "content": f"The {w[4]} sits beside the {w[5]}."}


# ----- the loops -----------------------------------------------------------------------------------------------


def cli_loop(surface: Surface, home: Path, workspace: Path, until: float, *, alone: bool = False) -> None:
    vocabulary = Vocabulary(0, seed="soak-cli")
    env = service_env(home)
    n = 0
    while going(until, alone, n):
        n += 1
        memory = fact(vocabulary, "user" if n % 3 == 0 else "project")
        if n % 2:
            args = ["memory", "write", "--type", memory["type"], "--name", memory["name"], "--description",
                    memory["description"], "--content", memory["content"], "-o", "json"]
        else:
            args = ["memory", "search", "where the sits beside", "-o", "json"] if n % 4 == 0 else \
                ["memory", "list", "--limit", "20", "-o", "json"]
        started = time.perf_counter()
        proc = subprocess.run([COMPOZY, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
        surface.record(started, proc.returncode == 0, args[1], proc.stdout[-300:] + proc.stderr[-300:], alone=alone)


def http_loop(surface: Surface, client: httpx.Client, workspace: Path, until: float, writer_id: int,
              *, alone: bool = False) -> None:
    vocabulary = Vocabulary(writer_id, seed=f"soak-{surface.name}")
    ws = str(workspace)
    mine: list[str] = []
    n = 0
    while going(until, alone, n):
        n += 1
        kind = n % 4
        started = time.perf_counter()
        try:
            if kind == 1:
                response = client.post("/api/memory", json={**fact(vocabulary), "workspace": ws})
                if response.status_code == 200 and response.json()["applied"]:
                    mine.append(response.json()["decision"]["target_filename"])
            elif kind == 2:
                response = client.get("/api/memory", params={"workspace": ws, "limit": 20})
            elif kind == 3:
                response = client.post("/api/memory/search", json={"query": "where does the sits beside",
                                                                    "workspace": ws})
            elif mine:
                w = [vocabulary.word() for _ in range(3)]
                response = client.patch(f"/api/memory/{mine[-1]}", json={
                    "workspace": ws, "content": f"Now the {w[0]} holds {w[1]} and {w[2]}."})
            else:
                response = client.get("/api/memory/health", params={"workspace": ws})
            surface.record(started, 200 <= response.status_code < 300, f"{response.request.method} "
                           f"{response.request.url.path}", response.text[:300], alone=alone)
        except httpx.HTTPError as exc:
            surface.record(started, False, "request", repr(exc), alone=alone)


def mcp_loop(surface: Surface, home: Path, workspace: Path, until: float, *, alone: bool = False) -> None:
    from mcp import Client, StdioServerParameters

    env = service_env(home)
    params = StdioServerParameters(command=COMPOZY, args=["mcp", "--session", "soak"], env=env, cwd=str(workspace))
    vocabulary = Vocabulary(3, seed="soak-mcp")

    async def go() -> None:
        async with Client(params) as client:
            n = 0
            while going(until, alone, n):
                n += 1
                if n % 3 == 1:
                    tool, arguments = "compozy__memory_propose", {"operation": "add", **fact(vocabulary)}
                elif n % 3 == 2:
                    tool, arguments = "compozy__memory_list", {"limit": 20}
                else:
                    tool, arguments = "compozy__memory_search", {"query": "where does the sits beside"}
                started = time.perf_counter()
                try:
                    result = await client.call_tool(tool, arguments)
                    surface.record(started, not result.is_error, tool,
                                   result.content[0].text if result.is_error and result.content else None,
                                   alone=alone)
                except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
                    surface.record(started, False, tool, repr(exc), alone=alone)

    asyncio.run(go())


def reindex_loop(surface: Surface, workspace_id: str, until: float, *, alone: bool = False) -> None:
    from memory.domain.enums import Origin
    from memory.services.catalog import ReindexInput
    from memory.services.inputs import Caller
    from memory.services.jobs import JobIdInput, job_get, reindex_job_start

    caller = Caller(origin=Origin.HTTP)
    while time.perf_counter() < until:
        started = time.perf_counter()
        try:
            job = reindex_job_start(data=ReindexInput.parse({"workspace": workspace_id}), caller=caller)
            while job.status in ("queued", "running") and time.perf_counter() < until + 120:
                time.sleep(0.2)
                job = job_get(data=JobIdInput.parse({"job_id": job.id}), caller=caller)
            surface.record(started, job.status == "succeeded", "reindex job", job.error or job.status, alone=alone)
        except Exception as exc:  # noqa: BLE001
            surface.record(started, False, "reindex job", repr(exc), alone=alone)
        if alone:
            return
        time.sleep(1.0)


# ----- the run -------------------------------------------------------------------------------------------------


def soak(seconds: float, base: Path) -> dict[str, Any]:
    home = base / "home"
    workspace = base / "project"
    (workspace / ".git").mkdir(parents=True)
    home.mkdir(mode=0o700)
    os.environ["COMPOZY_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    os.environ.pop("COMPOZY_FAULT", None)
    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()
    seeded = subprocess.run([COMPOZY, "memory", "write", "--type", "project", "--name", "Soak Seed",
                             "--description", "Creates the workspace", "--content", "The soak starts here."],
                            cwd=workspace, env=service_env(home), capture_output=True, text=True, timeout=300)
    if seeded.returncode != 0:
        raise RuntimeError(seeded.stderr)
    import tomllib

    workspace_id = tomllib.loads((workspace / ".compozy" / "workspace.toml").read_text())["workspace_id"]
    server = start_serve(home, workspace, base / "serve.log", cluster=True, timeout_s=180)
    token = (home / "token").read_text().strip()
    tcp = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    uds = httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path)), base_url="http://localhost",
                       timeout=120)
    surfaces = {name: Surface(name) for name in ("cli", "tcp", "socket", "mcp", "reindex")}
    loops: dict[str, Callable[..., None]] = {
        "cli": lambda until, alone=False: cli_loop(surfaces["cli"], home, workspace, until, alone=alone),
        "tcp": lambda until, alone=False: http_loop(surfaces["tcp"], tcp, workspace, until, 1, alone=alone),
        "socket": lambda until, alone=False: http_loop(surfaces["socket"], uds, workspace, until, 2, alone=alone),
        "mcp": lambda until, alone=False: mcp_loop(surfaces["mcp"], home, workspace, until, alone=alone),
        "reindex": lambda until, alone=False: reindex_loop(surfaces["reindex"], workspace_id, until, alone=alone),
    }
    try:
        # The floor: each surface alone for a moment (about 3 s each) before they all run at once.
        for loop in loops.values():
            loop(time.perf_counter() + 3, alone=True)
        started = time.perf_counter()
        until = started + seconds
        threads = [threading.Thread(target=loop, args=(until,), name=name, daemon=True)
                   for name, loop in loops.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=seconds + 600)
        elapsed = time.perf_counter() - started
    finally:
        tcp.close()
        uds.close()
        code = stop_serve(server)
    health = subprocess.run([COMPOZY, "memory", "health", "-o", "json"], cwd=workspace, env=service_env(home),
                            capture_output=True, text=True, timeout=300)
    health_status = json.loads(health.stdout).get("status") if health.returncode == 0 else f"exit {health.returncode}"
    found = violations(home)
    errors = [error for surface in surfaces.values() for error in surface.errors]
    return {
        "seconds": seconds,
        "elapsed_seconds": round(elapsed, 1),
        "surfaces": {name: surface.report() for name, surface in surfaces.items()},
        "calls": sum(surface.calls for surface in surfaces.values()),
        "error_count": len(errors),
        "errors": errors[:20],
        "serve_exit": code,
        "health": health_status,
        "violations": found,
        "violation_count": len(found),
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the temp home and workspace for inspection")
    # The soak builds its own home (a live server runs in it), so common.main only records the commit measured.
    common.main(parser, measure, exit_code=lambda result: 1 if result["error_count"] or result["violation_count"]
                or result["health"] != "ok" else 0)


def measure(_env: None, args: argparse.Namespace) -> dict[str, Any]:
    return common.in_own_temp_dir("soak", args.keep, lambda base: soak(args.seconds, base))


if __name__ == "__main__":
    main()
