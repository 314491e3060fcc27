"""Claude Code hook latency: `compozy hook claude-code <event>` with the service running and without, beside a
standard-library client on the same Unix socket.

    .venv/bin/python bench/hook_bench.py
    .venv/bin/python bench/hook_bench.py --turns 40 --in-process-turns 10

One fresh COMPOZY_HOME and workspace (`common.start()`), ten prefilled memories (so SessionStart has an index to
answer with), then `compozy serve --no-cluster` (bench/live.py) on loopback and the socket. Each variant drives its
own session: SessionStart once (untimed), then per turn two lines (a prompt and its answer, with a tool call) are
appended to that session's transcript and the turn's two hooks run, UserPromptSubmit then Stop, each timed from
the process start (or the request) to its exit (or the full answer):

  hook_served       the `compozy` console script, service running: the thin client (compozy/hook_client.py)
                    forwards the payload over the socket to POST /api/hooks/claude-code/<event>
  stdlib_process    the floor a hook process can reach: `python -c` with the standard library's http.client
                    posting the same request over the same socket and printing the output (the same interpreter,
                    the same site-packages, no product import)
  stdlib_call       the same request from this process over one new connection each: the socket and the
                    service's own work, without any process start
  hook_in_process   the `compozy` console script with the service stopped: the fallback, which starts Django and
                    runs the same service in the hook's own process (fewer turns: it costs a second or more)

The served and floor variants run interleaved turn by turn (their order rotating), so load on the shared machine
moves both. Target: hook_served p50 under 150 ms and within 3x of stdlib_process's p50.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import common

FLOOR_CLIENT = r"""
import http.client, json, os, socket, sys
raw = sys.stdin.buffer.read()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
connection = http.client.HTTPConnection("localhost")
connection.sock = sock
body = json.dumps({"stdin": raw.decode(), "cwd": os.getcwd()}).encode()
connection.request("POST", sys.argv[2], body=body, headers={"Content-Type": "application/json"})
output = json.loads(connection.getresponse().read()).get("output")
if output is not None:
    sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
"""


class Session:
    """One Claude Code session: its id, its transcript file, and the turns written so far."""

    def __init__(self, workspace: Path, name: str) -> None:
        self.id = str(uuid.uuid4())
        self.workspace = workspace
        self.transcript = workspace.parent / f"transcript-{name}.jsonl"
        self.transcript.write_text("")
        self.turns = 0

    def payload(self, event: str) -> bytes:
        return json.dumps({"session_id": self.id, "transcript_path": str(self.transcript), "cwd": str(self.workspace),
                           "hook_event_name": event, "source": "startup"}).encode()

    def add_turn(self) -> None:
        self.turns += 1
        prompt, answer = str(uuid.uuid4()), str(uuid.uuid4())
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        common_fields = {"sessionId": self.id, "cwd": str(self.workspace), "isSidechain": False, "timestamp": stamp}
        lines = [
            {"type": "user", "uuid": prompt, **common_fields, "message": {"role": "user", "content": (
                f"Turn {self.turns}: check the billing worker's retry policy and run the tests.")}},
            {"type": "assistant", "uuid": answer, "parentUuid": prompt, **common_fields, "message": {
                "role": "assistant", "content": [
                    {"type": "text", "text": f"Turn {self.turns}: the retry policy keeps three attempts."},
                    {"type": "tool_use", "id": f"toolu_{self.turns}", "name": "Bash",
                     "input": {"command": "pytest -q tests/test_worker.py"}}]}},
        ]
        with self.transcript.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)


def run_process(command: list[str], stdin: bytes, cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, input=stdin, cwd=cwd, env=env, capture_output=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{command[:3]} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return elapsed


def stdlib_call(socket_path: Path, route: str, stdin: bytes, cwd: Path) -> float:
    started = time.perf_counter()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path))
    connection = http.client.HTTPConnection("localhost")
    connection.sock = sock
    body = json.dumps({"stdin": stdin.decode(), "cwd": str(cwd)}).encode()
    connection.request("POST", route, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    if response.status != 200:
        raise SystemExit(f"POST {route} answered {response.status}: {answer[:500]!r}")
    return elapsed


def summary(times: dict[str, list[float]]) -> dict[str, object]:
    both = [value for values in times.values() for value in values]
    return {"all": common.timing_summary(both), **{event: common.timing_summary(v) for event, v in times.items()}}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--turns", type=int, default=30, help="Timed turns per served/floor variant (2 hooks each).")
    parser.add_argument("--in-process-turns", type=int, default=8, help="Timed turns with the service stopped.")
    parser.add_argument("--warmup", type=int, default=3, help="Untimed turns per variant first.")
    common.main(parser, measure, home="hook")


def measure(env: common.Env, args: argparse.Namespace) -> dict[str, object]:
    from live import COMPOZY, service_env, start_serve, stop_serve

    words = common.Words(7)
    for _ in range(10):
        item = common.content(words)
        common.log(f"prefill {item.name}")
        subprocess.run([COMPOZY, "memory", "write", "--type", "project", "--name", item.name, "--description",
                        item.description, "--content", item.body], cwd=env.workspace, env=service_env(env.home),
                       check=True, capture_output=True)
    child_env = service_env(env.home)
    server = start_serve(env.home, env.workspace, env.base / "serve.log")
    results: dict[str, object] = {}
    try:
        socket_path = server.socket_path
        sessions = {name: Session(env.workspace, name) for name in ("hook_served", "stdlib_process", "stdlib_call")}
        events = ("UserPromptSubmit", "Stop")

        def call(variant: str, session: Session, event: str) -> float:
            stdin = session.payload(event)
            route = f"/api/hooks/claude-code/{event}"
            if variant == "hook_served":
                return run_process([COMPOZY, "hook", "claude-code", event], stdin, env.workspace, child_env)
            if variant == "stdlib_process":
                return run_process([sys.executable, "-c", FLOOR_CLIENT, str(socket_path), route], stdin,
                                   env.workspace, child_env)
            return stdlib_call(socket_path, route, stdin, env.workspace)

        for name, session in sessions.items():
            call(name, session, "SessionStart")
        times = {name: {event: [] for event in events} for name in sessions}
        order = list(sessions)
        common.log(f"served and floor variants: {args.warmup} warm-up + {args.turns} turns")
        for turn in range(args.warmup + args.turns):
            order = order[1:] + order[:1]
            for name in order:
                session = sessions[name]
                session.add_turn()
                for event in events:
                    elapsed = call(name, session, event)
                    if turn >= args.warmup:
                        times[name][event].append(elapsed)
        for name in sessions:
            results[name] = summary(times[name])
        served_log = server.output()
    finally:
        stop_serve(server)
    if socket_path.exists():
        socket_path.unlink()  # a stale socket file is refused at connect anyway; gone, the client does not try

    common.log(f"service stopped: {args.in_process_turns} in-process turns")
    fallback = Session(env.workspace, "hook_in_process")
    run_process([COMPOZY, "hook", "claude-code", "SessionStart"], fallback.payload("SessionStart"), env.workspace,
                child_env)
    in_process: dict[str, list[float]] = {event: [] for event in events}
    for _turn in range(args.in_process_turns):
        fallback.add_turn()
        for event in events:
            in_process[event].append(run_process([COMPOZY, "hook", "claude-code", event], fallback.payload(event),
                                                 env.workspace, child_env))
    results["hook_in_process"] = summary(in_process)

    # Every variant recorded every turn: the hooks really ran (a hook that failed would exit 0 and log).
    hooks_log = env.home / "logs" / "hooks.log"
    failures = hooks_log.read_text().splitlines() if hooks_log.exists() else []
    served_p50 = results["hook_served"]["all"]["p50_ms"]
    floor_p50 = results["stdlib_process"]["all"]["p50_ms"]
    return {
        "benchmark": "hook_bench",
        "machine": common.machine(),
        "turns": args.turns, "in_process_turns": args.in_process_turns, "warmup": args.warmup,
        "results": results,
        "hook_failures_logged": len(failures),
        "served_errors_in_server_log": served_log.count("Error handling request"),
        "target": {"served_p50_ms": served_p50, "floor_p50_ms": floor_p50,
                   "ratio_to_floor": round(served_p50 / floor_p50, 2),
                   "under_150_ms": served_p50 < 150, "within_3x_of_floor": served_p50 <= 3 * floor_p50},
    }


if __name__ == "__main__":
    main()
