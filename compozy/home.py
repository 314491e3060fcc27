"""$COMPOZY_HOME is private to its owner: it holds every memory (the database) and the inspector's session keys.

The home and its `run/` directory are 0700, and the database (with its WAL and SHM), the API token, the secret key
and the lock files are 0600, whatever the umask. SQLite creates the WAL and SHM with the database file's mode, so
the database is created 0600 here before any connection opens it. An existing home with looser modes (from an
older version, or a umask 022 `mkdir`) is tightened at start-up; the process that tightens says so once in the log.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from compozy.config import compozy_home

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
DATABASE = "compozy.db"
PRIVATE_DIRS = ("", "run")
TOKEN = "token"
PRIVATE_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal", TOKEN, "secret_key",
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


# ----- the API token ---------------------------------------------------------------------------------------------
# TCP requests to the API carry it as a bearer token (memory/api/auth.py checks it; `compozy memory token` rotates
# it through memory/services/tokens.py). It lives here, below every surface, because it is a file of the home.


def token_path() -> Path:
    return compozy_home() / TOKEN


_cached_token: dict[str, tuple[int, str]] = {}


def read_or_create_token() -> str:
    """The token, re-read only when the file changes (a rotation takes effect on the next request)."""
    path = token_path()
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        rotate_token()
        stamp = path.stat().st_mtime_ns
    cached = _cached_token.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    token = path.read_text().strip()
    _cached_token[str(path)] = (stamp, token)
    return token


def rotate_token() -> str:
    """Write a new token atomically, readable by its owner only."""
    path = token_path()
    private_dir(path.parent)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".token.{os.getpid()}.{secrets.token_hex(4)}.compozy-tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    return token
