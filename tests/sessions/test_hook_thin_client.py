"""`compozy hook claude-code <event>` as a thin client: with `compozy serve` running it forwards the payload over
the Unix socket without starting Django, pydantic or the MCP SDK, and prints what the in-process path prints; with
no service it falls back to that path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import COMPOZY, Cli
from tests.live import start_serve, stop_serve
from tests.sessions.test_claude_code_hooks import SESSION, Agent

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
