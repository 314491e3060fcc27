"""Issue 24 item 7 on the other surfaces: a database held by another process's write transaction answers
memory.controller.timeout over REST (503, the JSON error document) and as an MCP tool error through the MCP SDK,
while reads keep working; nothing is a traceback or a 500."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.api.conftest import start_server, stop_server
from tests.conftest import COMPOZY, Cli
from tests.helpers import tool_document
from tests.trust.helpers import new_checkout, tmpfs


@contextlib.contextmanager
def database_held(home: Path) -> Iterator[None]:
    """Another process's write transaction on the home's database."""
    connection = sqlite3.connect(home / "compozy.db", isolation_level=None, check_same_thread=False)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("UPDATE memory_state SET value = value WHERE key = 'generation'")
    try:
        yield
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def body(workspace: Path, name: str, content: str) -> dict:
    return {"type": "project", "name": name, "description": f"About {name}", "content": content,
            "workspace": str(workspace)}


def test_rest_answers_503_controller_timeout_while_the_database_is_held_and_still_serves_reads(
        tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    server = start_server(home, workspace)
    try:
        with server.uds() as client:
            assert client.post("/api/memory", json=body(workspace, "First fact", "Before the lock.")).status_code \
                in (200, 201)
            with database_held(home):
                blocked = client.post("/api/memory", json=body(workspace, "Second fact", "While it is held."))
                assert blocked.status_code == 503, blocked.text
                assert blocked.headers["content-type"].startswith("application/json")
                assert blocked.json()["code"] == "memory.controller.timeout"
                assert set(blocked.json()) == {"code", "message", "details"}
                listed = client.get("/api/memory", params={"workspace": str(workspace)})
                assert listed.status_code == 200, listed.text
                assert [m["filename"] for m in listed.json()["memories"]] == ["project_first_fact.md"]
            after = client.post("/api/memory", json=body(workspace, "Second fact", "After the lock."))
            assert after.status_code in (200, 201), after.text
    finally:
        stop_server(server)


def test_an_mcp_tool_call_gets_a_controller_timeout_error_while_the_database_is_held(cli: Cli) -> None:
    assert cli("memory", "write", "--type", "project", "--name", "First fact", "--description", "d",
               "--content", "Before the lock.").code == 0
    params = StdioServerParameters(command=COMPOZY, args=["mcp", "--session", "locked-1"], env=cli.env(),
                                   cwd=str(cli.cwd))

    async def go():
        async with Client(params) as client:
            await client.list_tools()  # booted (migrate, replay) before the database is held
            with database_held(cli.home):
                proposed = await client.call_tool("compozy__memory_propose", {
                    "operation": "add", "type": "project", "name": "Second fact", "description": "d",
                    "content": "Proposed while the database is held."})
                listed = await client.call_tool("compozy__memory_list", {})
            return proposed, listed

    proposed, listed = asyncio.run(go())
    ok, error = tool_document(proposed)
    assert not ok
    assert error["code"] == "memory.controller.timeout", error
    ok, document = tool_document(listed)
    assert ok and [m["filename"] for m in document["memories"]] == ["project_first_fact.md"]


def test_a_hook_while_the_database_is_held_exits_0_without_a_traceback_and_logs_controller_timeout(cli: Cli) -> None:
    from tests.sessions.claude_agent import Agent

    agent = Agent(cli)
    agent.write_transcript("phase1")
    agent.hook("SessionStart")
    with database_held(cli.home):
        stopped = agent.cli("hook", "claude-code", "Stop", input=agent.payload("Stop"))
    # A hook never blocks the agent nor prints a traceback at it, whatever the database is doing.
    assert stopped.code == 0, stopped.stderr
    assert "Traceback" not in stopped.stderr and "Traceback" not in stopped.stdout
    logged = [entry for entry in agent.log() if entry.get("event") == "Stop"]
    assert [entry["code"] for entry in logged] == ["memory.controller.timeout"], logged
    assert all("Traceback" not in str(entry) for entry in agent.log())


def test_over_the_mcp_sdk_a_read_only_home_answers_reads_and_refuses_a_write_with_the_storage_code(
        cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "rohome", "64m") as mount:
        ro = Cli(home=mount, cwd=new_checkout(tmp_path / "roproject"))
        assert ro("memory", "write", "--type", "project", "--name", "First fact", "--description", "d",
                  "--content", "Before the home went read-only.").code == 0
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
        params = StdioServerParameters(command=COMPOZY, args=["mcp"], env=ro.env(),
                                       cwd=str(ro.cwd))

        async def go():
            async with Client(params) as client:
                listed = await client.call_tool("compozy__memory_list", {})
                proposed = await client.call_tool("compozy__memory_propose", {
                    "operation": "add", "type": "project", "name": "Second fact", "description": "d",
                    "content": "Not on a read-only home."})
                return listed, proposed

        listed, proposed = asyncio.run(go())
        ok, document = tool_document(listed)
        assert ok, document
        assert [m["filename"] for m in document["memories"]] == ["project_first_fact.md"]
        ok, error = tool_document(proposed)
        assert not ok and error["code"] == "memory.storage.read_only", error
