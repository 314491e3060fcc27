"""The extractor's inbox with real processes killed mid-way: a stager killed before its rename leaves nothing a
drain would take, and a drain killed by SIGKILL while submitting leaves its claimed file, which the next drain
finishes with nothing lost and nothing decided twice."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from memory.controller.faults import FAULT_EXIT_CODE
from tests.conftest import REPO, Cli

CHILD = Path(__file__).resolve().parent / "extractor_child.py"
TEXTS = ["My editor is helix.", "We use pnpm for package management.", "I prefer short answers.",
         "Our CI runs on GitHub Actions.", "From now on, run the linter before every commit."]


def child(cli: Cli, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), "--workspace", str(cli.cwd), *args], cwd=REPO,
                          env=cli.env(**env), capture_output=True, text=True, timeout=120)


def summary(completed: subprocess.CompletedProcess[str]) -> dict:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def decisions(home: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(home / "compozy.db") as db:
        return db.execute("SELECT candidate_hash, op, target_filename, origin FROM memory_decisions "
                          "ORDER BY decided_at, id").fetchall()


def inbox_names(home: Path) -> list[str]:
    inbox = home / "memory" / "_inbox"
    return sorted(p.name for p in inbox.rglob("*") if p.is_file()) if inbox.exists() else []


def stage_args() -> list[str]:
    return ["stage", "--session", "sess-crash", *[part for text in TEXTS for part in ("--text", text)]]


def test_a_stager_killed_before_its_rename_leaves_nothing_a_drain_takes(cli):
    killed = child(cli, *stage_args(), COMPOZY_FAULT="stage_after_temp_write")
    assert killed.returncode == FAULT_EXIT_CODE
    [leftover] = inbox_names(cli.home)
    assert leftover.startswith(".") and leftover.endswith(".compozy-tmp")  # the whole file, never renamed
    drained = summary(child(cli, "drain"))
    assert drained == {"files": [], "failures": [], "candidates": []}
    assert decisions(cli.home) == []


def test_a_drain_killed_by_sigkill_is_finished_on_restart_with_nothing_lost_or_decided_twice(cli, memory_root):
    staged = summary(child(cli, *stage_args()))
    assert staged["candidates"] == len(TEXTS)

    killed = child(cli, "drain", COMPOZY_FAULT="drain_after_candidate@2", COMPOZY_FAULT_SIGNAL="KILL")
    assert killed.returncode == -signal.SIGKILL
    [claimed] = inbox_names(cli.home)
    assert claimed.endswith(".jsonl.processing")
    assert len(decisions(cli.home)) == 2

    finished = summary(child(cli, "drain"))
    assert finished["failures"] == [] and len(finished["files"]) == 1
    # The two decided before the kill come back as they were; the other three are decided now.
    assert [applied for _op, applied, _file in finished["candidates"]] == [False, False, True, True, True]
    rows = decisions(cli.home)
    assert len(rows) == len(TEXTS) and len({row[0] for row in rows}) == len(TEXTS)
    assert {row[1] for row in rows} == {"add"} and {row[3] for row in rows} == {"extractor"}
    assert inbox_names(cli.home) == []
    files = sorted(p.name for p in (cli.home / "memory").glob("*.md")) + \
        sorted(p.name for p in (memory_root).glob("*.md"))
    assert sorted(row[2] for row in rows) == sorted(f for f in files if f != "MEMORY.md")

    again = summary(child(cli, "drain"))
    assert again["candidates"] == [] and len(decisions(cli.home)) == len(TEXTS)
