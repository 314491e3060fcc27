"""$COMPOZY_HOME is private to its owner: it holds every memory (the database) and the inspector's session keys.

The home and its `run/` directory are 0700, and the database (with its WAL and SHM), the API token, the secret key
and the lock files are 0600, whatever the umask. Every file the product writes, here or in a workspace's
`.compozy/` (memory files, checkpoints, staging, reports), is written by `write_private` (or its two halves,
`reserve_private` and `commit_private`): a temp file beside the target created 0600, fsync'd, renamed over the
target (or linked, where the first writer must win), and the directory fsync'd; `private_dir` makes every
directory it creates 0700. Git records only a file's executable bit, so a 0600 memory file still shares through a
clone. SQLite creates the WAL and SHM with the database file's mode, so
the database is created 0600 here before any connection opens it. An existing home with looser modes (from an
older version, or a umask 022 `mkdir`) is tightened at start-up; the process that tightens says so once in the log.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from compozy.config import compozy_home

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# A write in progress (or a dead writer's leftover): never a memory, never read; replay removes stale ones.
TEMP_SUFFIX = ".compozy-tmp"
DATABASE = "compozy.db"
PRIVATE_DIRS = ("", "run")
TOKEN = "token"
PRIVATE_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal", TOKEN, "secret_key",
                 "run/write.lock", "run/migrate.lock", "run/extractor-drain.lock")

# What this process tightened (filled by secure_home at settings import, logged once by the app's ready()).
tightened: list[str] = []


def private_dir(path: Path) -> None:
    """mkdir -p where every directory it creates is 0700 (chmod after each, because the umask trims mkdir's mode;
    `mkdir -p` would give the parents it creates the umask's mode). Directories that exist are left as they are."""
    missing: list[Path] = []
    current = path
    while not current.is_dir() and current.parent != current:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue  # another writer made it meanwhile (private too)
        _tighten(directory, PRIVATE_DIR, report=False)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def discard_temp(temp: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)


def reserve_private(path: Path, data: bytes) -> Path:
    """Write `data` to a new temp file beside `path`, 0600 whatever the umask, fsync it and return it: the bytes
    are on the disk before anyone relies on them. A write that fails (a full disk, a read-only filesystem)
    removes its temp file, so no 0-byte leftover stays behind. The directory must exist."""
    temp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        discard_temp(temp)
        raise
    os.close(fd)
    return temp


def commit_private(temp: Path, path: Path, *, replace: bool = True) -> bool:
    """Put a reserved temp file at `path` and fsync the directory. `replace`: rename over whatever is there (a
    link at the target is replaced, never followed). Otherwise link it, so that of several writers racing to
    create the file exactly one wins: False when the file already existed (the temp file is dropped either
    way)."""
    try:
        if replace:
            os.replace(temp, path)
        else:
            try:
                os.link(temp, path)
            except FileExistsError:
                return False
            finally:
                discard_temp(temp)
    except BaseException:
        discard_temp(temp)
        raise
    fsync_dir(path.parent)
    return True


def write_private(path: Path, data: bytes | str, *, replace: bool = True) -> bool:
    """The one way the product writes a file: its directories made 0700, then `reserve_private` and
    `commit_private` (see there; False only when `replace` is off and the file already existed)."""
    private_dir(path.parent)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return commit_private(reserve_private(path, raw), path, replace=replace)


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
    token = secrets.token_urlsafe(32)
    write_private(token_path(), token + "\n")
    return token


def secret_key(home: Path) -> str:
    """The home's secret (sessions and CSRF of the inspector), created on first use. Several processes may start
    together on a fresh home: the first one's secret is the one every process reads."""
    path = home / "secret_key"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(50), replace=False)
    return path.read_text().strip()
