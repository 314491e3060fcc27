"""`compozy hook claude-code <event>` as a thin client: with `compozy serve` running it forwards the payload over
the Unix socket without starting Django, pydantic or the MCP SDK, and prints what the in-process path prints; with
no service it falls back to that path."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from bench.live import start_serve, stop_serve
from tests.conftest import COMPOZY, Cli
from tests.sessions.claude_agent import SESSION, Agent

HEAVY = ("django", "pydantic", "mcp", "rest_framework")


@pytest.fixture
def served(cli: Cli, tmp_path):
    server = start_serve(cli.home, cli.cwd, tmp_path / "serve.log")
    yield server
    stop_serve(server)


def _imported_top_packages(agent: Agent, event: str, stdin: bytes) -> tuple[set[str], str]:
    """The top-level packages a hook process imported (python -X importtime), and what it printed."""
    proc = subprocess.run([sys.executable, "-X", "importtime", COMPOZY, "hook", "claude-code", event],
                          cwd=agent.cli.cwd, env=agent.cli.env(), input=stdin, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    names = set()
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names, proc.stdout.decode()


def test_with_the_service_running_a_hook_imports_no_django_and_prints_what_the_in_process_hook_prints(
        cli, served, tmp_path):
    agent = Agent(cli)
    assert cli("memory", "write", "--type", "project", "--name", "Billing Worker", "--description",
               "Where the billing worker runs", "--content", "The billing worker runs on the queue host.").code == 0
    agent.write_transcript("phase1")
    imported, fast = _imported_top_packages(agent, "SessionStart", agent.payload("SessionStart"))
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    context = json.loads(fast)["hookSpecificOutput"]["additionalContext"]
    assert "Billing Worker" in context
    imported, printed = _imported_top_packages(agent, "Stop", agent.payload("Stop"))
    assert printed == "" and not imported & set(HEAVY)
    # The service ran it (the socket's origin), in transcript order, the turn closed.
    history = cli("session", "history", SESSION, "-o", "json").json["events"]
    assert [e["actor"] for e in history if e["op"] == "memory.session.started"] == ["uds"]
    assert [r["kind"] for r in agent.events()][-2:] == ["assistant_message", "done"]
    # A payload the service refuses: nothing printed, exit 0, the same stable code in hooks.log.
    refused = cli("hook", "claude-code", "Stop", input=b'{"hook_event_name": "Stop"}')
    assert (refused.code, refused.stdout) == (0, "")
    assert agent.log()[-1]["code"] == "hook.payload_invalid"

    stop_serve(served)
    # No service: the in-process path answers the same session with the same bytes.
    imported, fallback = _imported_top_packages(agent, "SessionStart", agent.payload("SessionStart"))
    assert "django" in imported  # it really was the in-process path
    assert fallback == fast
    refused = cli("hook", "claude-code", "Stop", input=b'{"hook_event_name": "Stop"}')
    assert (refused.code, refused.stdout) == (0, "")
    assert [entry["code"] for entry in agent.log()[-2:]] == ["hook.payload_invalid", "hook.payload_invalid"]


def test_version_imports_neither_django_nor_the_mcp_sdk(cli):
    proc = subprocess.run([sys.executable, "-X", "importtime", COMPOZY, "--version"], env=cli.env(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.decode().startswith("compozy ")
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in proc.stderr.decode().splitlines()
                if line.startswith("import time:") and "|" in line}
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def rejected_payloads(agent: Agent) -> dict[str, bytes]:
    """Hook payloads the service must refuse, each for a session id no other case uses."""
    good = json.loads(agent.payload("Stop"))
    return {
        "invalid json": b'{"session_id": "ghost-json", "hook_event_name": "Stop"',
        "bad session id": json.dumps({**good, "session_id": "../ghost bad id"}).encode(),
        "session id not a string": json.dumps({**good, "session_id": 12345}).encode(),
        "missing session id": json.dumps({k: v for k, v in good.items() if k != "session_id"}).encode(),
        "cwd not a string": json.dumps({**good, "session_id": "ghost-cwd-type", "cwd": ["/"]}).encode(),
    }


def sessions_listed(cli: Cli) -> list[str]:
    listed = cli("session", "list", "--all-workspaces", "-o", "json")
    assert listed.code == 0, listed.stderr
    return [row["session_id"] for row in listed.json["sessions"]]


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"])
def test_a_rejected_hook_payload_creates_no_session_through_the_in_process_hook(cli, event):
    agent = Agent(cli)
    agent.write_transcript("phase1")
    for label, stdin in rejected_payloads(agent).items():
        result = cli("hook", "claude-code", event, input=stdin)
        assert (result.code, result.stdout) == (0, ""), label
        assert agent.log()[-1]["code"] == "hook.payload_invalid", (label, agent.log()[-1])
    assert sessions_listed(cli) == []


def test_a_rejected_hook_payload_posted_to_the_service_creates_no_session(cli, served):
    agent = Agent(cli)
    agent.write_transcript("phase1")

    with httpx.Client(transport=httpx.HTTPTransport(uds=str(cli.home / "run" / "compozy.sock")),
                      base_url="http://localhost", timeout=30) as client:
        for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
            for label, stdin in rejected_payloads(agent).items():
                answer = client.post(f"/api/hooks/claude-code/{event}", json={"stdin": stdin.decode()})
                assert answer.status_code == 200, (event, label, answer.text)
                body = answer.json()
                assert (body["output"], body["failure"]) == (None, "hook.payload_invalid"), (event, label, body)
            # Through the thin client too: the same payloads, forwarded over the socket.
            for label, stdin in rejected_payloads(agent).items():
                result = cli("hook", "claude-code", event, input=stdin)
                assert (result.code, result.stdout) == (0, ""), (event, label)
    assert sessions_listed(cli) == []
