"""A dreaming run killed with SIGKILL in the middle, in a real `compozy` process: the next process to start
finishes the run when its decision is durable (and stamps the signals as the run would have), fails it otherwise
(stamping nothing), and releases the lock either way. A run whose process is alive is never touched.

COMPOZY_FAULT_PAUSE=<step> makes the runner print `COMPOZY_PAUSED <step>` and wait at that boundary; the test
then kills it with SIGKILL from outside.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.background.dreaming_helpers import SUBJECTS
from tests.conftest import COMPOZY
from tests.crash.run import WRITER, Run


def prepare(base: Path) -> tuple[Run, list[str]]:
    run = Run.create(base)
    writes = [{"type": "project", "scope": "workspace", "name": name, "description": name, "content": body}
              for name, body in SUBJECTS[:6]]
    proc = subprocess.run([sys.executable, str(WRITER), "--workspace", str(run.workspace), "--spec",
                           json.dumps(writes)], cwd=run.workspace, env=run.cli.env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    files = [item["filename"] for item in json.loads(proc.stdout.strip().splitlines()[-1])["results"]]
    root_key = run.query("SELECT DISTINCT root_key FROM memory_catalog_entries WHERE root_key LIKE 'workspace:%'")[0][0]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    db = sqlite3.connect(run.db)
    with db:
        db.executemany("INSERT INTO memory_recall_signals (root_key, filename, recall_count, recall_score, "
                       "first_recalled_at, last_recalled_at, promoted_at, promoted_run) VALUES (?, ?, 3, 0.8, ?, ?, "
                       "NULL, '')", [(root_key, f, now, now) for f in files])
    db.close()
    return run, files


def start_paused(run: Run, step: str) -> subprocess.Popen:
    """`dream trigger --force` in a child that stops at `step` and waits to be killed."""
    child = subprocess.Popen([COMPOZY, "memory", "dream", "trigger", "--force", "-o", "json"], cwd=run.workspace,
                             env=run.cli.env(COMPOZY_FAULT_PAUSE=step), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 120
    assert child.stderr is not None
    while time.monotonic() < deadline:
        line = child.stderr.readline()
        if line.startswith(f"COMPOZY_PAUSED {step}"):
            return child
        if not line and child.poll() is not None:
            break
    child.kill()
    raise AssertionError(f"the runner never reached {step}: {child.communicate()}")


def kill(child: subprocess.Popen) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


def runs(run: Run) -> list[tuple]:
    return run.query("SELECT id, status, recovered, decision_op, error FROM memory_consolidations ORDER BY started_at")


def stamped(run: Run) -> list[tuple[str, str]]:
    return run.query("SELECT filename, promoted_run FROM memory_recall_signals WHERE promoted_at IS NOT NULL")


def dream_events(run: Run) -> list[str]:
    return [row[0] for row in run.query("SELECT op FROM memory_events WHERE op LIKE 'memory.dream.%' ORDER BY id")]


def test_a_run_killed_before_its_decision_is_failed_at_the_next_start_and_the_lock_is_recovered(tmp_path):
    run, files = prepare(tmp_path)
    child = start_paused(run, "dream_synthesis")
    try:
        # While the runner lives, another process's start-up leaves its run and its lock alone.
        live = run.ok("memory", "dream", "status", "-o", "json").json
        assert live["running"]["status"] == "running"
        lock = next(g for g in live["gates"] if g["gate"] == "lock")
        assert lock["passed"] is False and live["running"]["id"] in lock["waiting_for"]
    finally:
        kill(child)

    status = run.ok("memory", "dream", "status", "-o", "json").json  # a new process: bootstrap recovers
    (run_id, state, recovered, decision_op, error), = runs(run)
    assert (state, recovered, decision_op) == ("failed", 1, "")
    error = json.loads(error)
    assert error["code"] == "memory.dream.interrupted" and error["step"] == "synthesis"
    assert stamped(run) == []
    assert dream_events(run) == ["memory.dream.run.started", "memory.dream.run.failed"]
    assert (run.root / "_system" / "dreaming" / "failures" / f"{run_id}.json").is_file()
    assert next(g for g in status["gates"] if g["gate"] == "lock")["passed"] is True
    assert run.query("SELECT COUNT(*) FROM memory_dream_locks") == [(0,)]

    again = run.ok("memory", "dream", "trigger", "--force", "-o", "json").json
    assert again["triggered"] is True and again["dream"]["status"] == "completed"
    assert sorted(f for f, _r in stamped(run)) == sorted(files)


@pytest.mark.parametrize("step", ["dream_stamp", "after_decision_commit"])
def test_a_run_killed_after_its_decision_was_logged_is_finished_at_the_next_start(tmp_path, step):
    """dream_stamp: the synthesis is applied; after_decision_commit: only its decision row is durable (inside
    the controller), so replay applies it first."""
    run, files = prepare(tmp_path)
    kill(start_paused(run, step))

    shown = run.ok("memory", "dream", "list", "-o", "json").json["dreams"]
    (run_id, state, recovered, decision_op, error), = runs(run)
    assert (state, recovered, decision_op, error) == ("completed", 1, "add", None)
    assert shown[0]["status"] == "completed" and shown[0]["recovered"] is True
    assert sorted(stamped(run)) == sorted((f, run_id) for f in files)
    assert dream_events(run) == ["memory.dream.run.started", "memory.dream.run.promoted"]
    assert run.query("SELECT COUNT(*) FROM memory_dream_locks") == [(0,)]
    synthesis = run.query("SELECT target_filename, applied_at IS NOT NULL FROM memory_decisions "
                          "WHERE origin = 'dreaming'")
    assert len(synthesis) == 1 and synthesis[0][1] == 1
    assert (run.root / synthesis[0][0]).is_file()
    assert run.health()["status"] == "ok"
