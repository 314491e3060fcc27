"""Invariant 3 for the batch reconcile of a pull: `memory sync` records everything that arrived (adds, updates and
deletes of many files) as decisions of origin `sync`, committed in one durable transaction, then applies them all
in one transaction. A sync killed at each boundary of that (between the decisions' commit and the catalog
update, inside the catalog write, after MEMORY.md was written, just before applied_at) is repaired by the next
process's replay into the state an uncrashed sync leaves: the same files, MEMORY.md, catalog rows and chunks,
decisions and one event per decision."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory.controller.faults import FAULT_EXIT_CODE
from tests.conftest import Cli
from tests.crash import invariants
from tests.crash.writer import Vocabulary

WRITER = Path(__file__).resolve().parent / "writer.py"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
FIRST, ADDED = 12, 5
EDITED = [f"user_m{n:02d}.md" for n in range(5)]
DELETED = [f"user_m{n:02d}.md" for n in range(5, 7)]
# The boundaries a batch reconcile passes: the decisions' durable commit, then one transaction holding the
# catalog rows (inside_catalog_write), MEMORY.md (after_reindex follows its write), the events and applied_at.
STEPS = ("after_decision_commit", "inside_catalog_write", "after_reindex", "before_applied")


def ok(machine: Cli, *args: str, **env: str) -> Any:
    result = machine(*args, **GIT_ENV, **env)
    assert result.code == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.json if result.stdout.startswith("{") else result


def write_global(machine: Cli, names: list[str], seed: int) -> None:
    vocabulary = Vocabulary(seed)
    spec = []
    for name in names:
        words = [vocabulary.word() for _ in range(6)]
        spec.append({"scope": "global", "type": "user", "name": name, "description": f"The {words[0]} of {words[1]}",
                     "content": f"The {words[2]} is in the {words[3]} with {words[4]} and {words[5]}."})
    proc = subprocess.run([sys.executable, str(WRITER), "--workspace", str(machine.cwd), "--spec", json.dumps(spec)],
                          cwd=machine.cwd, env=machine.env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def state(machine: Cli) -> dict[str, Any]:
    """What a sync leaves that must not depend on a crash (ids, times and the files' mtimes taken out)."""
    def query(sql: str) -> list[tuple]:
        return invariants.query(machine.home, sql)

    root = machine.home / "memory"
    return {
        "files": {path.name: path.read_text() for path in sorted(root.glob("*.md"))},
        "catalog": query("SELECT e.filename, e.name, e.description, e.content_hash, e.size, e.type, e.slug, "
                         "e.body_key, e.frontmatter, e.created_at, e.updated_at, c.ordinal, c.name, c.description, "
                         "c.body, c.vector IS NOT NULL, c.vector_model FROM memory_catalog_entries e "
                         "LEFT JOIN memory_chunks c ON c.entry_id = e.id ORDER BY e.filename, c.ordinal"),
        "decisions": query("SELECT op, origin, target_filename, post_content_hash, prior_content_hash, reason, "
                           "applied_at IS NOT NULL FROM memory_decisions ORDER BY seq"),
        "events": query("SELECT ev.op, ev.actor, ev.target, ev.metadata FROM memory_events ev JOIN memory_decisions "
                        "d ON d.id = ev.decision_id ORDER BY d.seq, ev.op"),
    }


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Machine B before the sync that pulls A's changes (a home to copy for each kill), and the state an uncrashed
    sync leaves it in."""
    base = tmp_path_factory.mktemp("sync-crash")
    remote = base / "global.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    machines = []
    for name in ("a", "b"):
        (base / name / "home").mkdir(parents=True)
        (base / name / "cwd").mkdir()
        machines.append(Cli(home=base / name / "home", cwd=base / name / "cwd"))
    a, b = machines
    write_global(a, [f"M{n:02d}" for n in range(FIRST)], seed=1)
    ok(a, "memory", "sync", "--remote", str(remote), "-o", "json")
    assert len(ok(b, "memory", "sync", "--remote", str(remote), "-o", "json")["reconciled"]) == FIRST
    # A edits some files by hand, deletes others and writes new ones; its next sync records and pushes them all.
    memory = a.home / "memory"
    for name in EDITED:
        (memory / name).write_text((memory / name).read_text() + "Edited on machine A.\n")
    for name in DELETED:
        (memory / name).unlink()
    write_global(a, [f"New{n}" for n in range(ADDED)], seed=2)
    ok(a, "memory", "sync", "-o", "json")
    before = base / "b-before"
    shutil.copytree(b.home, before, symlinks=True)
    report = ok(b, "memory", "sync", "-o", "json")
    assert len(report["reconciled"]) == len(EDITED) + len(DELETED) + ADDED
    ok(b, "memory", "list", "--scope", "global", "-o", "json")
    assert invariants.violations(b.home) == []
    return before, state(b)


@pytest.mark.parametrize("step", STEPS)
def test_a_sync_killed_while_reconciling_a_pull_is_replayed_to_the_state_of_an_uncrashed_sync(step, pulled,
                                                                                              tmp_path):
    before, expected = pulled
    home = tmp_path / "home"
    shutil.copytree(before, home, symlinks=True)
    (tmp_path / "cwd").mkdir()
    b = Cli(home=home, cwd=tmp_path / "cwd")
    killed = b("memory", "sync", "-o", "json", COMPOZY_FAULT=step, **GIT_ENV)
    assert killed.code == FAULT_EXIT_CODE, killed.stdout + killed.stderr
    # The kill landed after the batch's decisions were committed and before any of them was applied: every one is
    # waiting, and the catalog still holds what was there before the pull (a deleted file's row, no new file's).
    unapplied = invariants.query(home, "SELECT op, origin FROM memory_decisions WHERE applied_at IS NULL")
    assert sorted(unapplied) == sorted([("update", "sync")] * len(EDITED) + [("delete", "sync")] * len(DELETED)
                                       + [("add", "sync")] * ADDED)
    rows = {name for (name,) in invariants.query(home, "SELECT filename FROM memory_catalog_entries")}
    assert set(DELETED) <= rows and not any(name.startswith("user_new") for name in rows)

    ok(b, "memory", "list", "--scope", "global", "-o", "json")  # any command replays first
    assert invariants.violations(home) == []
    assert state(b) == expected
