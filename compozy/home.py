"""$COMPOZY_HOME is private to its owner: it holds every memory (the database) and the inspector's session keys.

The home and its `run/` directory are 0700, and the database (with its WAL and SHM), the API token, the secret key
and the lock files are 0600, whatever the umask. SQLite creates the WAL and SHM with the database file's mode, so
the database is created 0600 here before any connection opens it. An existing home with looser modes (from an
older version, or a umask 022 `mkdir`) is tightened at start-up; the process that tightens says so once in the log.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
DATABASE = "compozy.db"
PRIVATE_DIRS = ("", "run")
PRIVATE_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal", "token", "secret_key",
                 "run/write.lock", "run/migrate.lock", "run/extractor-drain.lock")

# What this process tightened (filled by secure_home at settings import, logged once by the app's ready()).
tightened: list[str] = []


def private_dir(path: Path) -> None:
    """mkdir -p with the last directory created 0700 (chmod after, because the umask trims mkdir's mode)."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        _tighten(path, PRIVATE_DIR, report=False)


def _tighten(path: Path, wanted: int, *, report: bool = True) -> None:
    try:
        current = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        return
    if current == wanted or os.path.islink(path):
        return
    try:
        os.chmod(path, wanted)
    except PermissionError:
        tightened.append(f"could not tighten {path.name or path} ({current:04o}): not its owner")
        return
    if report:
        tightened.append(f"{path.name} {current:04o} -> {wanted:04o}")


def secure_home(home: Path) -> None:
    """Create or tighten the home, and create the database file 0600 before SQLite opens it."""
    fresh = not home.is_dir()
    private_dir(home)
    for name in PRIVATE_DIRS:
        directory = home / name if name else home
        if directory.is_dir():
            _tighten(directory, PRIVATE_DIR, report=not fresh)
    database = home / DATABASE
    if not database.exists():
        fd = os.open(database, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            os.fchmod(fd, PRIVATE_FILE)  # exactly 0600, even under a umask that would trim the owner's bits
        finally:
            os.close(fd)
    for name in PRIVATE_FILES:
        _tighten(home / name, PRIVATE_FILE)


def tightened_message(home: Path) -> str | None:
    if not tightened:
        return None
    return f"Tightened permissions under $COMPOZY_HOME ({home}): " + ", ".join(tightened)
