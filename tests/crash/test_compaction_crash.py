"""Pressure compaction with a real process killed by SIGKILL between the durable coverage commit and the archive
update. Afterwards every event is still unarchived and readable, and the next compaction finishes the archive
without asking the provider for a second summary."""

from __future__ import annotations

import json
import signal
import subprocess

from memory.controller.faults import SESSION_STEPS
from tests.conftest import COMPOZY, Cli

WINDOW = 1000


def events_of(cli: Cli) -> list[dict]:
    listed = cli("session", "events", "crash-1", "-o", "json")
    assert listed.code == 0, listed.stderr
    return listed.json["events"]


def checkpoint_decisions(cli: Cli) -> list[dict]:
    listed = cli("memory", "decisions", "list", "--filename", "project_checkpoint_summary.md", "-o", "json")
    assert listed.code == 0, listed.stderr
    return listed.json["decisions"]


def test_a_compaction_killed_after_its_coverage_commit_is_finished_by_the_next_run(cli, memory_root):
    assert "after_coverage_commit" in SESSION_STEPS
    assert cli("session", "start", "--session", "crash-1", "--context-window", str(WINDOW)).code == 0
    turns = []
    for number in (1, 2):
        turns += [{"kind": "user_message", "content": f"Ask number {number} about topic{number}.",
                   "turn_id": f"t{number}", "external_key": f"u{number}"},
                  {"kind": "assistant_message", "content": f"I finished topic{number}.", "turn_id": f"t{number}",
                   "external_key": f"a{number}"},
                  {"kind": "done", "turn_id": f"t{number}", "external_key": f"d{number}"}]
    turns.append({"kind": "user_message", "content": "The turn in progress.", "turn_id": "t3"})
    appended = cli("session", "append", "crash-1", "--jsonl", "-", "-o", "json",
                   input="".join(json.dumps(row) + "\n" for row in turns).encode())
    assert appended.code == 0 and appended.json["last_seq"] == 7

    # The usage update crosses the threshold; the process is SIGKILLed right after the coverage commit, before
    # the archive update (COMPOZY_FAULT_SIGNAL=KILL: no exit handler, no flush, as `kill -9`).
    killed = subprocess.run([COMPOZY, "session", "usage", "crash-1", "--used", str(WINDOW), "--turn-id", "t3"],
                            cwd=cli.cwd,
                            env=cli.env(COMPOZY_FAULT="after_coverage_commit", COMPOZY_FAULT_SIGNAL="KILL"),
                            capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    # Coverage was committed and the summary is in the checkpoint, but nothing is archived.
    rows = events_of(cli)
    assert [row["seq"] for row in rows] == list(range(1, 9))  # the 7 rows and the usage row
    assert not any(row["archived"] for row in rows)
    assert rows[0]["content"] == "Ask number 1 about topic1."
    shown = cli("session", "show", "crash-1", "-o", "json").json
    assert [(c["from_seq"], c["to_seq"]) for c in shown["coverage"]] == [(1, 6)]
    summaries = checkpoint_decisions(cli)
    assert len(summaries) == 1
    checkpoint = memory_root / "project_checkpoint_summary.md"
    written = checkpoint.read_bytes()

    # The next compaction run finishes the archive and asks for no second summary.
    rerun = cli("session", "usage", "crash-1", "--used", str(WINDOW), "--turn-id", "t3", "-o", "json")
    assert rerun.code == 0, rerun.stderr
    assert rerun.json["compaction"]["reason"] == "covered"
    assert rerun.json["compaction"]["archived"] == 6
    assert [row["archived"] for row in events_of(cli)] == [True] * 6 + [False] * 3
    assert checkpoint_decisions(cli) == summaries
    assert checkpoint.read_bytes() == written
