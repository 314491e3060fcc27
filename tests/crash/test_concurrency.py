"""Writes are serialized per database, across real processes.

Four writer processes (tests/crash/writer.py) boot on one fresh COMPOZY_HOME, wait at a handshake, and are
released together; each then writes 200 distinct memories through the service layer. Afterwards the disk, the
catalog, MEMORY.md, the decision log and the event log must agree exactly: nothing lost, nothing duplicated, no
decision interleaved with another decision's file mutation.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.crash import invariants
from tests.crash.invariants import query
from tests.environment import child_environment
from tests.helpers import workspace_root

WRITER = Path(__file__).resolve().parent / "writer.py"
PER_WRITER = 200


@dataclass
class Writer:
    writer_id: int
    scope: str
    type: str
    agent: str | None = None

    def argv(self, workspace: Path) -> list[str]:
        args = [sys.executable, str(WRITER), "--workspace", str(workspace), "--writer-id", str(self.writer_id),
                "--count", str(PER_WRITER), "--scope", self.scope, "--type", self.type, "--handshake"]
        if self.agent:
            args += ["--agent", self.agent, "--agent-tier", "workspace"]
        return args


def child_env(home: Path) -> dict[str, str]:
    # No COMPOZY_FAULT (or any other COMPOZY_ setting) leaks into a child by accident.
    env = child_environment()
    env["COMPOZY_HOME"] = str(home)
    return env


def run_writers(home: Path, workspace: Path, writers: list[Writer]) -> tuple[list[dict[str, Any]], float]:
    procs = [subprocess.Popen(w.argv(workspace), cwd=workspace, env=child_env(home), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in writers]
    try:
        # Every child has migrated (or waited for the one that did) and replayed; now release them together.
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        started = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=600)
            assert proc.returncode == 0, stderr
            outputs.append(json.loads(stdout.strip().splitlines()[-1]))
        elapsed = time.monotonic() - started
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs, elapsed


def workspace_id(workspace: Path) -> str:
    return tomllib.loads((workspace / ".compozy" / "workspace.toml").read_text("utf-8"))["workspace_id"]


def parse_index(root: Path) -> list[dict[str, str]]:
    entries = invariants.parse_index((root / "MEMORY.md").read_text("utf-8"))
    assert entries is not None, "MEMORY.md is not in the rendered form"
    return entries


def assert_root_consistent(home: Path, root: Path, root_key: str, expected: set[str], pattern: str) -> None:
    on_disk = {p.name for p in root.glob("*.md") if p.name != "MEMORY.md"}
    assert on_disk == {p.name for p in root.glob(pattern)}
    assert on_disk == expected, (len(on_disk), len(expected))
    assert not [p for p in root.rglob("*") if p.name.endswith(".compozy-tmp")]

    catalog = query(home, "SELECT filename, name, description FROM memory_catalog_entries "
                          "WHERE root_key = ? AND is_system = 0", (root_key,))
    assert len(catalog) == len(expected)
    assert {row[0] for row in catalog} == on_disk
    chunks = query(home, "SELECT count(*) FROM memory_chunks c JOIN memory_catalog_entries e ON e.id = c.entry_id "
                         "WHERE e.root_key = ?", (root_key,))
    assert chunks == [(len(expected),)]

    index = parse_index(root)
    assert len(index) == len(expected), "MEMORY.md lists a file twice or misses one"
    assert {entry["filename"] for entry in index} == on_disk
    # Lines are kept in the order the memories were added, which is the order their decisions were made.
    added = [row[0] for row in query(home, "SELECT target_filename FROM memory_decisions WHERE root_key = ? "
                                           "AND op = 'add' ORDER BY decided_at, id", (root_key,))]
    assert [entry["filename"] for entry in index] == added
    by_file = {filename: (name, description) for filename, name, description in catalog}
    for entry in index:
        assert (entry["name"], entry["description"]) == by_file[entry["filename"]]


def assert_decisions_and_events(home: Path, total: int) -> None:
    assert query(home, "SELECT op, count(*), count(applied_at) FROM memory_decisions GROUP BY op") == [
        ("add", total, total)]
    assert query(home, "SELECT count(*), count(DISTINCT decision_id) FROM memory_events "
                       "WHERE op = 'memory.write.committed'") == [(total, total)]
    # Each decision has exactly one event, and no decision event is anything but a commit.
    assert query(home, "SELECT count(*) FROM memory_events WHERE decision_id IS NOT NULL") == [(total,)]
    assert query(home, "SELECT count(*) FROM memory_decisions d WHERE NOT EXISTS "
                       "(SELECT 1 FROM memory_events ev WHERE ev.decision_id = d.id)") == [(0,)]


def assert_files_match_their_decisions(home: Path, roots: dict[str, Path]) -> None:
    """Every file holds exactly the content its own decision recorded: no write landed on another's file."""
    rows = query(home, "SELECT root_key, target_filename, post_content_hash FROM memory_decisions")
    for root_key, filename, post_hash in rows:
        data = (roots[root_key] / filename).read_bytes()
        assert hashlib.sha256(data).hexdigest() == post_hash, filename


def assert_writers_interleaved(home: Path) -> None:
    """A guard on the test itself: the writers really ran at the same time (their decisions interleave)."""
    owners = [filename.split("_", 1)[1][0] for (filename,) in
              query(home, "SELECT target_filename FROM memory_decisions ORDER BY decided_at, id")]
    switches = sum(1 for a, b in pairwise(owners) if a != b)
    print(f"writer switches in decision order: {switches}")
    assert switches >= 4, "the writers ran one after another; the test did not exercise concurrency"


def assert_writers_succeeded(outputs: list[dict[str, Any]]) -> dict[int, set[str]]:
    written: dict[int, set[str]] = {}
    for output in outputs:
        assert output["errors"] == [], output["errors"][:5]
        assert output["ok"] == PER_WRITER
        assert output["ops"] == {"add": PER_WRITER}
        written[output["writer"]] = {r["filename"] for r in output["results"]}
        assert len(written[output["writer"]]) == PER_WRITER
    return written


def assert_health_ok(home: Path, workspace: Path) -> None:
    health = Cli(home=home, cwd=workspace)("memory", "health", "-o", "json")
    assert health.code == 0, health.stderr
    assert health.json["status"] == "ok", health.json
    assert health.json["unapplied_decisions"] == 0


def report(label: str, outputs: list[dict[str, Any]], elapsed: float) -> None:
    writes = sum(len(o["results"]) for o in outputs)
    per_writer = ", ".join(f"writer {o['writer']}: {o['elapsed_seconds']:.1f}s" for o in outputs)
    print(f"\n{label}: {writes} writes by {len(outputs)} processes in {elapsed:.1f}s wall ({per_writer})")


def fresh(tmp_path: Path) -> tuple[Path, Path]:
    """A new, empty home and workspace: the racing writers create the secret, the schema and the identity."""
    home = tmp_path / "home"
    workspace = tmp_path / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    return home, workspace


def test_four_processes_writing_200_memories_each_into_one_workspace_lose_and_duplicate_nothing(tmp_path):
    home, workspace = fresh(tmp_path)
    writers = [Writer(i, "workspace", "project") for i in range(4)]
    outputs, elapsed = run_writers(home, workspace, writers)
    report("workspace scope", outputs, elapsed)

    written = assert_writers_succeeded(outputs)
    expected = set().union(*written.values())
    assert len(expected) == 4 * PER_WRITER
    root = workspace_root(workspace)
    assert_root_consistent(home, root, f"workspace:{workspace_id(workspace)}", expected, "project_*.md")
    assert_decisions_and_events(home, 4 * PER_WRITER)
    assert_files_match_their_decisions(home, {f"workspace:{workspace_id(workspace)}": root})
    assert_writers_interleaved(home)
    # The four racing first writes created one workspace identity, not four.
    assert query(home, "SELECT count(*) FROM memory_workspaces") == [(1,)]
    assert_health_ok(home, workspace)


def test_concurrent_writers_into_the_global_and_an_agent_scope_keep_each_roots_memory_index_exact(tmp_path):
    home, workspace = fresh(tmp_path)
    writers = [Writer(0, "global", "user"), Writer(1, "global", "user"),
               Writer(2, "agent", "feedback", agent="reviewer"), Writer(3, "agent", "feedback", agent="reviewer")]
    outputs, elapsed = run_writers(home, workspace, writers)
    report("global + agent scopes", outputs, elapsed)

    written = assert_writers_succeeded(outputs)
    ws = workspace_id(workspace)
    assert_root_consistent(home, home / "memory", "global", written[0] | written[1], "user_*.md")
    assert_root_consistent(home, workspace / ".compozy" / "agents" / "reviewer" / "memory",
                           f"agent:reviewer:workspace:{ws}", written[2] | written[3], "feedback_*.md")
    assert query(home, "SELECT root_key, count(*) FROM memory_catalog_entries GROUP BY root_key ORDER BY root_key") == [
        (f"agent:reviewer:workspace:{ws}", 2 * PER_WRITER), ("global", 2 * PER_WRITER)]
    assert_decisions_and_events(home, 4 * PER_WRITER)
    assert_files_match_their_decisions(home, {
        "global": home / "memory",
        f"agent:reviewer:workspace:{ws}": workspace / ".compozy" / "agents" / "reviewer" / "memory"})
    assert_writers_interleaved(home)
    assert_health_ok(home, workspace)


# Another process wins the race to create $COMPOZY_HOME/secret_key between this process's exists() check and its
# own link(): the winner's file is complete, because the secret is only ever linked into place after an fsync.
SECRET_RACE = """
import pathlib
real_exists = pathlib.Path.exists

def exists(self, *args, **kwargs):
    if self.name == "secret_key" and not real_exists(self):
        with open(self, "x") as handle:
            handle.write("the-other-process-secret")
        return False
    return real_exists(self, *args, **kwargs)

pathlib.Path.exists = exists
import compozy.settings
print(repr(compozy.settings.SECRET_KEY))
"""


def test_a_process_losing_the_race_to_create_the_home_secret_boots_with_the_winners_secret(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([sys.executable, "-c", SECRET_RACE], cwd=tmp_path, env=child_env(home),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-600:]
    assert proc.stdout.strip() == "'the-other-process-secret'"
    assert not [p for p in home.iterdir() if p.name.endswith(".compozy-tmp")]


def test_processes_starting_together_on_a_fresh_home_share_one_non_empty_secret(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    code = "import compozy.settings; print(compozy.settings.SECRET_KEY)"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=child_env(home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 6, [err[-300:] for _out, err in outputs]
    secrets = {out.strip() for out, _err in outputs}
    assert len(secrets) == 1 and len(secrets.pop()) > 20
