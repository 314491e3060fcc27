"""Hole 2: $COMPOZY_HOME is private to its owner whatever the umask.

With umask 022 the home was 0755 and compozy.db and its WAL 0644: any local user could read every memory and the
inspector's session keys. The home is now created 0700 (an existing one is tightened at start-up, said once in the
log) and the database, WAL, SHM, token, secret and lock files are 0600.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.background.dreaming_helpers import SUBJECTS
from tests.conftest import COMPOZY
from tests.environment import child_environment

PRIVATE_FILES = ("compozy.db", "compozy.db-wal", "compozy.db-shm", "token", "secret_key", "run/write.lock",
                 "run/migrate.lock")
TIGHTENED = "Tightened permissions under"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def run_env(home: Path) -> dict[str, str]:
    env = child_environment()
    env["COMPOZY_HOME"] = str(home)
    return env


def run(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*args], cwd=cwd, env=run_env(home), capture_output=True, text=True, timeout=120,
                          umask=0o022)


def use_every_file(home: Path, workspace: Path) -> subprocess.CompletedProcess[str]:
    """A write (database, WAL, SHM, locks, secret) and the API token, from real processes under umask 022."""
    written = run(home, workspace, COMPOZY, "memory", "write", "--type", "project", "--name", "Private Fact",
                  "--description", "A private fact",
                  "--content", "Only the owner reads this.", "-o", "json")
    assert written.returncode == 0, written.stderr
    token = run(home, workspace, sys.executable, "-c",
                "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'compozy.settings'; django.setup(); "
                "from compozy.home import read_or_create_token; read_or_create_token()")
    assert token.returncode == 0, token.stderr
    return written


def test_a_fresh_home_and_its_database_files_are_private_under_umask_022(tmp_path, workspace_dir):
    home = tmp_path / "fresh-home"
    use_every_file(home, workspace_dir)
    # The WAL and SHM exist while a connection is open; a reader holds one open while the modes are checked.
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                               "c.execute('select count(*) from memory_decisions').fetchall(); "
                               "print('open', flush=True); sys.stdin.readline()", str(home / "compozy.db")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, umask=0o022)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert mode(home) == 0o700
        assert mode(home / "run") == 0o700
        assert {name: oct(mode(home / name)) for name in PRIVATE_FILES} == {name: "0o600" for name in PRIVATE_FILES}
    finally:
        holder.communicate("\n", timeout=30)


def test_an_existing_world_readable_home_is_tightened_at_start_up_and_said_once(tmp_path, workspace_dir):
    home = tmp_path / "old-home"
    use_every_file(home, workspace_dir)
    os.chmod(home, 0o755)
    os.chmod(home / "run", 0o755)
    for name in PRIVATE_FILES:
        if (home / name).exists():
            os.chmod(home / name, 0o644)
    first = run(home, workspace_dir, COMPOZY, "memory", "list", "-o", "json")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(TIGHTENED) == 1, first.stderr
    assert str(home) in first.stderr
    assert mode(home) == 0o700 and mode(home / "run") == 0o700
    assert all(mode(home / name) == 0o600 for name in PRIVATE_FILES if (home / name).exists())
    second = run(home, workspace_dir, COMPOZY, "memory", "list", "-o", "json")
    assert second.returncode == 0 and TIGHTENED not in second.stderr, second.stderr


def test_every_workspace_artifact_and_home_file_is_private_under_umask_022(tmp_path, workspace_dir):
    """Memory files, MEMORY.md, workspace.toml, the checkpoint (built from prompts), the extractor's staging and
    dead letters, dreaming reports, _system/ and the home's logs: 0600 files in 0700 directories, whatever the
    umask. Git records only the executable bit, so 0600 memory files still share through a clone."""
    home = tmp_path / "home"
    written = []
    for name, body in SUBJECTS[:5]:
        result = run(home, workspace_dir, COMPOZY, "memory", "write", "--type", "project", "--name", name,
                     "--description", name, "--content", body, "-o", "json")
        assert result.returncode == 0, result.stderr
        written.append(json.loads(result.stdout)["decision"])
    # A session whose stop writes the checkpoint and runs the extractor (the task cluster inline, as serve runs it).
    assert run(home, workspace_dir, COMPOZY, "session", "start", "--session", "s1", "-o", "json").returncode == 0
    events = "".join(json.dumps(event) + "\n" for event in (
        {"kind": "user_message", "turn_id": "t1", "content": "We decided to use PostgreSQL 16 for billing. "
         "Remember that I prefer tabs over spaces in Makefiles."},
        {"kind": "assistant_message", "turn_id": "t1", "content": "Noted; I updated billing/db.py."},
        {"kind": "done", "turn_id": "t1", "content": ""}))
    appended = subprocess.run([COMPOZY, "session", "append", "s1", "--jsonl", "-", "-o", "json"], input=events,
                              cwd=workspace_dir, env={**run_env(home), "COMPOZY_Q_SYNC": "1"}, capture_output=True,
                              text=True, timeout=120, umask=0o022)
    assert appended.returncode == 0, appended.stderr
    stopped = subprocess.run([COMPOZY, "session", "stop", "s1", "-o", "json"], cwd=workspace_dir,
                             env={**run_env(home), "COMPOZY_Q_SYNC": "1"}, capture_output=True, text=True,
                             timeout=120, umask=0o022)
    assert stopped.returncode == 0, stopped.stderr
    # A staged file the drain cannot resolve stays as a dead letter: the extractor's own files, kept.
    workspace_id = written[0]["workspace_id"]
    db = sqlite3.connect(home / "compozy.db")
    with db:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        db.executemany("INSERT INTO memory_recall_signals (root_key, filename, recall_count, recall_score, "
                       "first_recalled_at, last_recalled_at, promoted_at, promoted_run) VALUES (?, ?, 3, 0.8, ?, ?, "
                       "NULL, '')", [(f"workspace:{workspace_id}", d["target_filename"], now, now) for d in written])
    db.close()
    dreamed = run(home, workspace_dir, COMPOZY, "memory", "dream", "trigger", "--force", "-o", "json")
    assert dreamed.returncode == 0 and json.loads(dreamed.stdout)["triggered"], dreamed.stdout + dreamed.stderr
    # A hook that fails logs under the home.
    run(home, workspace_dir, COMPOZY, "hook", "claude-code", "NoSuchEvent")

    compozy_dir = workspace_dir / ".compozy"
    made = {path.relative_to(tmp_path).as_posix() for top in (compozy_dir, home) for path in top.rglob("*")}
    # What the test must have made for its answer to mean anything.
    assert {"project/.compozy/memory/project_checkpoint_summary.md", "project/.compozy/workspace.toml",
            "project/.compozy/memory/MEMORY.md", "home/memory/_inbox", "home/logs/hooks.log"} <= made, sorted(made)
    assert any(name.startswith("project/.compozy/memory/_system/dreaming/") and name.endswith(".md")
               for name in made), sorted(made)
    assert any(name.startswith("home/memory/_inbox/s1") for name in made), sorted(made)
    readable = sorted(f"{oct(mode(path))} {path.relative_to(tmp_path)}" for top in (compozy_dir, home)
                      for path in [top, *top.rglob("*")] if not path.is_socket() and mode(path) & 0o077)
    assert readable == []
