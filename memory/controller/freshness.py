"""What arrived while nothing watched (a `git pull`, merge, checkout or rebase with `compozy serve` down) becomes
decisions before the next command or session reads the catalog.

Noticing is one stat: the root directory's mtime, compared with the one recorded the last time the root was found
in step with its catalog (`memory_state`, key `root_mtime:<hash of the root key>`). Git replaces a file it
checks out (unlink, then create), and the controller writes by rename, so either changes the directory's mtime;
an in-place save by an editor does not (the watcher or `memory reindex` records those, as before). Only when the
mtime moved is the root listed, (name, size, mtime) against the catalog rows, and only the files that differ are
reconciled, under the write lock, in one batch (`reconcile_files`: one durable commit of their decisions, one
transaction applying them), whatever the size of the root.
"""

from __future__ import annotations

from pathlib import Path

from django.db import connection

from compozy.config import Config
from memory.domain.document import Limits
from memory.domain.enums import Origin
from memory.domain.models import ScopeRef
from memory.domain.names import is_memory_document_name
from memory.store import files

from . import stamps
from .core import exclusive
from .reconcile import reconcile_files


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
    mtime_ns = stamps.root_mtime(root)
    if mtime_ns is None:
        return []
    if not force and stamps.recorded(ref.root_key) == mtime_ns:
        return []
    decided: list[str] = []
    limits = Limits(config.memory.file.max_lines, config.memory.file.max_bytes)
    # A link in place of a memory is never followed nor reconciled (health reports it): it must not stop the
    # call that noticed it, which may only read.
    changed = [name for name in changed_files(ref.root_key, root) if not (root / name).is_symlink()]
    if changed:
        with exclusive(config):
            decided.extend(decision.id for decision in
                           reconcile_files(ref, root, changed, limits, origin=origin).decisions)
    # Recorded even when a file was invalid (a merge conflict): health reports it, and resolving it is a
    # controller write, which moves the mtime again.
    stamps.record(ref.root_key, mtime_ns)
    return decided
