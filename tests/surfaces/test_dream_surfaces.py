"""`memory dream trigger|status|list|show|retry` and `memory decisions prune` on the CLI, REST (a live gunicorn)
and MCP (a real `compozy mcp` process), all on one home: the same call gives the same document, the same bad
input the same error code."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.api.conftest import Server, start_server, stop_server
from tests.background.dreaming_helpers import SUBJECTS
from tests.conftest import COMPOZY
from tests.environment import child_environment


def cli(server: Server, *args: str, **env: str) -> tuple[bool, dict[str, Any]]:
    environment = child_environment()
    environment.update(COMPOZY_HOME=str(server.home), **env)
    proc = subprocess.run([COMPOZY, "memory", *args, "-o", "json"], cwd=server.workspace, env=environment,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode == 0, json.loads(proc.stdout)


def http(server: Server, method: str, path: str, **kwargs: Any) -> tuple[bool, dict[str, Any]]:
    with server.tcp() as client:
        response = client.request(method, path, **kwargs)
    return response.status_code < 400, response.json()


async def tool(client: Client, name: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        text = result.content[0].text
        return False, json.loads(text[text.index("{"):])
    return True, result.structured_content


def seed(server: Server) -> list[str]:
    """Six memories over the API, strong recall signals for each, and two completed sessions in the ledger (one
    short of the gate)."""
    files = []
    for name, body in SUBJECTS[:6]:
        ok, document = http(server, "POST", "/api/memory", json={"type": "project", "name": name, "description": name,
                                                                 "content": body, "workspace": str(server.workspace)})
        assert ok, document
        files.append(document["decision"]["target_filename"])
    workspace_id = document["decision"]["workspace_id"]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    db = sqlite3.connect(server.home / "compozy.db")
    with db:
        db.executemany("INSERT INTO memory_recall_signals (root_key, filename, recall_count, recall_score, "
                       "first_recalled_at, last_recalled_at, promoted_at, promoted_run) VALUES (?, ?, 3, 0.8, ?, ?, "
                       "NULL, '')", [(f"workspace:{workspace_id}", f, now, now) for f in files])
    db.close()
    workspace = str(server.workspace)
    for index in range(2):  # two completed sessions in the ledger
        for path, body in (("/api/sessions", {"session_id": f"s{index}"}), (f"/api/sessions/s{index}/stop", {})):
            ok, document = http(server, "POST", path, json={**body, "workspace": workspace})
            assert ok, document
    return files


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("dream-surfaces")
    home, workspace = base / "home", base / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    running = start_server(home, workspace)
    yield running
    stop_server(running)


def same(*outcomes: tuple[bool, dict[str, Any]], ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    reference_ok, reference = outcomes[0]
    for ok, document in outcomes[1:]:
        assert ok == reference_ok, document
        left = {k: v for k, v in document.items() if k not in ignore}
        right = {k: v for k, v in reference.items() if k not in ignore}
        assert left == right, (json.dumps(left, sort_keys=True), json.dumps(right, sort_keys=True))
    return reference


def test_dream_and_prune_verbs_give_the_same_documents_on_every_surface(server):
    files = seed(server)
    workspace = str(server.workspace)
    params = StdioServerParameters(command=COMPOZY, args=["mcp", "--session", "dream-parity", "--toolsets",
                                                          "compozy__memory,compozy__memory_admin"], cwd=workspace,
                                   env={**child_environment(),
                                        "COMPOZY_HOME": str(server.home)})

    async def scenario() -> None:
        async with Client(params) as mcp:
            status = same(cli(server, "dream", "status"),
                          http(server, "GET", "/api/memory/dreams/status", params={"workspace": workspace}),
                          await tool(mcp, "compozy__memory_dream_status"))
            assert [g["gate"] for g in status["gates"] if not g["passed"]] == ["sessions"]

            blocked = same(cli(server, "dream", "trigger"),
                           http(server, "POST", "/api/memory/dreams/trigger", json={"workspace": workspace}),
                           await tool(mcp, "compozy__memory_dream_trigger"))
            assert (blocked["triggered"], blocked["reason"], blocked["dream"]) == (False, "sessions", None)

            ok, failed = cli(server, "dream", "trigger", "--force", COMPOZY_FAULT_RAISE="dream_synthesis")
            assert ok and failed["dream"]["status"] == "failed", failed
            run_id = failed["dream"]["id"]

            listed = same(cli(server, "dream", "list"),
                          http(server, "GET", "/api/memory/dreams", params={"workspace": workspace}),
                          await tool(mcp, "compozy__memory_dream_list"))
            assert [r["id"] for r in listed["dreams"]] == [run_id]
            shown = same(cli(server, "dream", "show", run_id),
                         http(server, "GET", f"/api/memory/dreams/{run_id}", params={"workspace": workspace}),
                         await tool(mcp, "compozy__memory_dream_show", run_id=run_id))
            assert shown["dream"]["error"]["step"] == "synthesis" and shown["artifact_text"]

            ok, retried = http(server, "POST", f"/api/memory/dreams/{run_id}/retry", json={"workspace": workspace})
            assert ok and retried["dream"]["status"] == "completed" and retried["dream"]["actor"] == "http"
            again = same(cli(server, "dream", "retry", run_id), await tool(mcp, "compozy__memory_dream_retry",
                                                                            run_id=run_id))
            assert (again["triggered"], again["reason"]) == (False, "signal")  # the retry promoted them all
            completed = same(
                cli(server, "dream", "show", retried["dream"]["id"]),
                http(server, "GET", f"/api/memory/dreams/{retried['dream']['id']}", params={"workspace": workspace}),
                await tool(mcp, "compozy__memory_dream_show", run_id=retried["dream"]["id"]))
            assert sorted(c["filename"] for c in completed["dream"]["candidates"]) == sorted(files)
            assert completed["decision"]["origin"] == "dreaming"

            for bad, code in (("drm_nope", "memory.validation"), ("drm_" + "0" * 26, "memory.not_found")):
                error = same(cli(server, "dream", "show", bad),
                             http(server, "GET", f"/api/memory/dreams/{bad}", params={"workspace": workspace}),
                             await tool(mcp, "compozy__memory_dream_show", run_id=bad))
                assert error["code"] == code

            pruned = same(cli(server, "decisions", "prune", "--dry-run"),
                          http(server, "POST", "/api/memory/decisions/prune", json={"dry_run": True}),
                          await tool(mcp, "compozy__memory_decisions_prune", dry_run=True), ignore=("cutoff",))
            assert pruned["dry_run"] is True and pruned["pruned"] == 0

    asyncio.run(scenario())


def test_the_cli_renders_dream_status_and_trigger_for_people(server):
    environment = child_environment()
    environment["COMPOZY_HOME"] = str(server.home)
    status = subprocess.run([COMPOZY, "memory", "dream", "status"], cwd=server.workspace, env=environment,
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert "GATE" in status.stdout and "WAITING FOR" in status.stdout
    trigger = subprocess.run([COMPOZY, "memory", "dream", "trigger"], cwd=Path(server.workspace), env=environment,
                             capture_output=True, text=True, timeout=120)
    assert trigger.returncode == 0 and trigger.stdout.startswith("not triggered: the ")
