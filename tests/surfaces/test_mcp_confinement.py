"""An agent's MCP session is confined, as an agent meets it through the official `mcp` client: to its own
sessions (naming another agent's session is refused like naming that agent), to the workspace its server was
started in (reads and writes alike), and to arguments of the declared types. The operator's admin toolset keeps
full access."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import COMPOZY, Cli
from tests.helpers import tool_document, workspace_root

ADMIN = "compozy__memory,compozy__memory_admin"


def calls(cli: Cli, *args: str, cwd: Path, run: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, Any]]:
    """Start `compozy mcp <args>` in `cwd`, make the calls in order; [(ok, document)]."""
    params = StdioServerParameters(command=COMPOZY, args=["mcp", *args], env=cli.env(), cwd=str(cwd))

    async def go() -> list[tuple[bool, Any]]:
        async with Client(params) as client:
            return [tool_document(await client.call_tool(name, arguments)) for name, arguments in run]

    return asyncio.run(go())


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """Two workspaces; bob's session bob-s2 in ws1 started with a snapshot that holds his private agent memory."""
    base = tmp_path_factory.mktemp("confine")
    home, ws1, ws2 = base / "home", base / "ws1", base / "ws2"
    home.mkdir()
    for ws in (ws1, ws2):
        (ws / ".git").mkdir(parents=True)
    cli = Cli(home=home, cwd=ws1)
    for ws, word in ((ws1, "zqone"), (ws2, "zqtwo")):
        made = cli("memory", "write", "--type", "project", "--name", f"Fact {word}", "--description", "a fact",
                   "--content", f"The {word} service listens on port 7000.", cwd=ws)
        assert made.code == 0, made.stderr
    bob = calls(cli, "--agent", "bob", "--workspace", str(ws1), cwd=ws1, run=[
        ("compozy__memory_propose", {"operation": "add", "type": "feedback", "name": "Bob Secret",
                                     "description": "bob's zqbobsecret habit",
                                     "content": "Bob keeps the zqbobsecret deploy key in his notes."}),
        ("compozy__memory_snapshot", {"session_id": "bob-s2"}),
    ])
    assert all(ok for ok, _ in bob), bob
    assert "zqbobsecret" in bob[1][1]["text"]
    return cli, ws1, ws2


def test_an_agent_naming_another_agents_session_is_refused_like_naming_that_agent(machine):
    cli, ws1, _ws2 = machine
    answers = calls(cli, "--agent", "alice", "--workspace", str(ws1), cwd=ws1, run=[
        ("compozy__memory_snapshot", {"session_id": "bob-s2"}),
        ("compozy__memory_snapshot", {"parent_session_id": "bob-s2"}),
        ("compozy__memory_snapshot", {"session_id": "alice-sub", "parent_session_id": "bob-s2"}),
        ("compozy__memory_snapshot", {"session_id": "bob-s2", "scope": "workspace"}),
        ("compozy__memory_snapshot", {"agent_name": "bob"}),
        ("compozy__memory_snapshot", {"session_id": "alice-s1"}),
    ])
    for ok, document in answers[:5]:
        assert not ok and document["code"] == "memory.scope.invalid", document
        assert document["details"]["reason"] == "other_agent", document
        assert "zqbobsecret" not in str(document)
    own_ok, own = answers[5]
    assert own_ok and "zqbobsecret" not in own["text"] and "zqone" in own["text"]


def test_the_operators_admin_toolset_still_reads_any_session(machine):
    cli, ws1, _ws2 = machine
    [(ok, document)] = calls(cli, "--agent", "alice", "--toolsets", ADMIN, "--workspace", str(ws1), cwd=ws1,
                             run=[("compozy__memory_snapshot", {"session_id": "bob-s2"})])
    assert ok and "zqbobsecret" in document["text"]


def test_every_agent_tool_naming_another_workspace_is_refused_reads_and_writes_alike(machine):
    cli, ws1, ws2 = machine
    ulid = (ws2 / ".compozy" / "workspace.toml").read_text().split('id = "', 1)[1].split('"', 1)[0]
    before = sorted(path.name for path in (workspace_root(ws2)).iterdir())
    other = str(ws2)
    answers = calls(cli, "--agent", "alice", "--workspace", str(ws1), cwd=ws1, run=[
        ("compozy__memory_propose", {"operation": "add", "type": "project", "name": "Planted", "workspace": other,
                                     "description": "planted", "content": "A zqplanted fact in ws2."}),
        ("compozy__memory_note", {"title": "Planted Note", "content": "A zqplanted note.", "workspace": other}),
        ("compozy__memory_show", {"filename": "project_fact_zqtwo.md", "workspace": other}),
        ("compozy__memory_search", {"query": "zqtwo", "workspace": other}),
        ("compozy__memory_list", {"workspace": other}),
        ("compozy__memory_snapshot", {"workspace": other}),
        ("compozy__memory_list", {"workspace": ulid}),
        ("compozy__memory_list", {"workspace": "../ws2"}),
        ("compozy__memory_list", {"workspace": str(ws1 / ".compozy")}),  # its own workspace, by a path inside
        ("compozy__memory_search", {"query": "zqtwo"}),
    ])
    for ok, document in answers[:8]:
        assert not ok and document["code"] == "memory.scope.invalid", document
        assert document["details"]["reason"] == "other_workspace", document
        assert "zqtwo" not in str(document)
    own_ok, own = answers[8]
    assert own_ok and [item["filename"] for item in own["memories"]] == ["project_fact_zqone.md"]
    search_ok, search = answers[9]
    assert search_ok and search["results"] == []
    assert sorted(path.name for path in (workspace_root(ws2)).iterdir()) == before


def test_the_operator_may_name_another_workspace(machine):
    cli, ws1, ws2 = machine
    [(ok, document)] = calls(cli, "--toolsets", ADMIN, "--workspace", str(ws1), cwd=ws1,
                             run=[("compozy__memory_list", {"workspace": str(ws2)})])
    assert ok and [item["filename"] for item in document["memories"]] == ["project_fact_zqtwo.md"]


def test_arguments_of_another_type_are_refused_not_coerced(machine):
    cli, ws1, _ws2 = machine
    answers = calls(cli, "--agent", "alice", "--workspace", str(ws1), cwd=ws1, run=[
        ("compozy__memory_list", {"limit": True}),
        ("compozy__memory_propose", {"operation": "add", "type": "project", "name": "Coerced", "dry_run": "yes",
                                     "description": "d", "content": "A zqcoerced fact."}),
        ("compozy__memory_list", {"detail": 1}),
        ("compozy__memory_search", {"query": 42}),
        ("compozy__memory_list", {"limit": 1, "detail": True}),
    ])
    for (ok, document), field in zip(answers[:4], ("limit", "dry_run", "detail", "query"), strict=True):
        assert not ok and document["code"] == "memory.validation", document
        assert document["details"] == {**document["details"], "field": field, "reason": "type"}
    assert answers[4][0]
    assert not list((workspace_root(ws1)).glob("project_coerced*"))


def test_an_update_naming_a_file_of_another_type_is_refused(machine):
    cli, ws1, _ws2 = machine
    [(ok, document)] = calls(cli, "--agent", "alice", "--workspace", str(ws1), cwd=ws1, run=[
        ("compozy__memory_propose", {"operation": "update", "filename": "project_fact_zqone.md", "type": "user",
                                     "content": "Rewritten as a zqwrongtype user memory."})])
    assert not ok and document["code"] == "memory.validation" and document["details"]["reason"] == "type_mismatch"
    assert not list(ws1.rglob("user_fact_zqone.md"))
