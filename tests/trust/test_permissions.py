"""Hole 2: $COMPOZY_HOME is private to its owner whatever the umask.

With umask 022 the home was 0755 and compozy.db and its WAL 0644: any local user could read every memory and the
inspector's session keys. The home is now created 0700 (an existing one is tightened at start-up, said once in the
log) and the database, WAL, SHM, token, secret and lock files are 0600.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import COMPOZY

PRIVATE_FILES = ("compozy.db", "compozy.db-wal", "compozy.db-shm", "token", "secret_key", "run/write.lock",
                 "run/migrate.lock")
TIGHTENED = "Tightened permissions under"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def run(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    return subprocess.run([*args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, umask=0o022)


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
