"""What arrived while nothing watched (a `git pull`, merge, checkout or rebase with `compozy serve` down) becomes
decisions before the next command or session reads the catalog.

Noticing is one stat: the root directory's mtime, compared with the one recorded the last time the root was found
in step with its catalog (`memory_state`, key `root_mtime:<hash of the root key>`). Git replaces a file it
checks out (unlink, then create), and the controller writes by rename, so either changes the directory's mtime;
an in-place save by an editor does not (the watcher or `memory reindex` records those, as before). Only when the
mtime moved is the root listed, (name, size, mtime) against the catalog rows, and only the files that differ are
reconciled, under the write lock, through `reconcile_file` (origin `file`); many of them go through
`reindex_root` in one batch.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from django.db import connection

from compozy.config import Config
from memory.domain.document import Limits
from memory.domain.enums import Origin
from memory.domain.models import ScopeRef
from memory.domain.names import is_memory_document_name
from memory.store import files

from .best_effort import best_effort_write
from .core import exclusive
from .reconcile import reconcile_file, reindex_root

# Above this many changed files one batch (one durable commit, one catalog transaction) beats a commit per file.
BATCH_FROM = 16


def _key(root_key: str) -> str:
    return "root_mtime:" + hashlib.sha256(root_key.encode()).hexdigest()[:40]


def _recorded(key: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM memory_state WHERE key = %s", [key])
        row = cursor.fetchone()
    return None if row is None else row[0]


def _record(key: str, mtime_ns: int) -> None:
    def write() -> None:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO memory_state (key, value) VALUES (%s, %s) "
                           "ON CONFLICT(key) DO UPDATE SET value = excluded.value", [key, mtime_ns])

    best_effort_write(write, what="the root's freshness stamp")


def changed_files(root_key: str, root: Path) -> list[str]:
    """Names whose (size, mtime) differ from their catalog row, files without a row, rows without a file."""
    listing = files.scan_root(root, with_stat=True).documents
    with connection.cursor() as cursor:
        cursor.execute("SELECT filename, size, mtime_ns FROM memory_catalog_entries WHERE root_key = %s "
                       "AND is_system = 0", [root_key])
        indexed = {name: (size, mtime) for name, size, mtime in cursor.fetchall()}
    return sorted(name for name in set(listing) | set(indexed)
                  if listing.get(name) != indexed.get(name) and is_memory_document_name(name))


def catch_up(ref: ScopeRef, root: Path, config: Config, *, origin: Origin = Origin.FILE,
             force: bool = False) -> list[str]:
    """Reconcile a root whose directory changed since it was last in step; returns the decision ids recorded.
    `force`: list it whatever its mtime says (`memory sync`, right after its own pull)."""
    try:
        mtime_ns = os.stat(root).st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return []
    key = _key(ref.root_key)
    if not force and _recorded(key) == mtime_ns:
        return []
    decided: list[str] = []
    limits = Limits(config.memory.file.max_lines, config.memory.file.max_bytes)
    # A link in place of a memory is never followed nor reconciled (health reports it): it must not stop the
    # call that noticed it, which may only read.
    changed = [name for name in changed_files(ref.root_key, root) if not (root / name).is_symlink()]
    if changed:
        with exclusive(config):
            if len(changed) >= BATCH_FROM:
                report = reindex_root(ref, root, limits=limits, origin=origin)
                decided.extend(report.external_decisions)
            else:
                for filename in changed:
                    result = reconcile_file(ref, root, filename, limits, origin=origin)
                    if result.decision is not None:
                        decided.append(result.decision.id)
    # Recorded even when a file was invalid (a merge conflict): health reports it, and resolving it is a
    # controller write, which moves the mtime again.
    _record(key, mtime_ns)
    return decided
