"""End to end with a real django-q2 `qcluster` process: a session's turns appended through the `compozy session`
CLI queue a run on the cluster, the run stages the candidates, the drain it queues submits them, and the memory is
on disk with its decision made by the extractor."""

from __future__ import annotations

import json
import sqlite3
import time

from bench.live import running_cluster

DEADLINE_S = 120


def test_a_sessions_turns_become_a_memory_through_a_real_cluster(cli, tmp_path, memory_root):
    log = tmp_path / "qcluster.log"
    with running_cluster(cli.cwd, cli.env(), log) as alive:
        assert cli("session", "start", "--session", "sess-e2e").code == 0
        rows = [{"kind": "user_message", "content": "My editor is helix. We use pnpm for package management.",
                 "turn_id": "t1"},
                {"kind": "assistant_message", "content": "Noted both.", "turn_id": "t1"}]
        appended = cli("session", "append", "sess-e2e", "--jsonl", "-",
                       input="\n".join(json.dumps(row) for row in rows).encode())
        assert appended.code == 0, appended.stderr
        memory = cli.home / "memory" / "user_editor.md"
        project = memory_root / "project_tool_for_package_management.md"
        deadline = time.monotonic() + DEADLINE_S
        while not (memory.is_file() and project.is_file()) and time.monotonic() < deadline:
            alive()
            time.sleep(0.5)
        assert memory.is_file() and project.is_file(), log.read_text()
    text = memory.read_text()
    assert "source_actor: extractor" in text and "- sess-e2e" in text and "My editor is helix." in text
    with sqlite3.connect(cli.home / "compozy.db") as db:
        decisions = db.execute("SELECT origin, op, session_id, target_filename FROM memory_decisions "
                               "ORDER BY target_filename").fetchall()
        ops = [row[0] for row in db.execute("SELECT op FROM memory_events WHERE op LIKE 'memory.extractor.%' "
                                            "ORDER BY id")]
    assert decisions == [("extractor", "add", "sess-e2e", "project_tool_for_package_management.md"),
                         ("extractor", "add", "sess-e2e", "user_editor.md")]
    assert ops == ["memory.extractor.started", "memory.extractor.completed"]
    listed = cli("memory", "extractor", "status", "-o", "json").json
    assert listed["counts"]["completed"] == 1 and listed["queue"]["inbox_files"] == 0
