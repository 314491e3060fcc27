"""The file watcher: while `compozy serve` runs, a hand edit, a new file or a deletion under any administered memory
root becomes a decision with origin `file`, through the controller's reconcile path (the one reindex and every
write use), usually well within two seconds.

- Roots: the global root, every agent's global tier, and for every workspace this machine knows, its root and its
  agents' workspace tiers. The set is refreshed every second, so a root created later is picked up; when a root
  starts being watched, files that differ from their catalog rows are reconciled (edits made before the watch).
- Events come from watchdog (inotify on Linux), watching each root directory itself (not `_system/` below it);
  without watchdog, or with `memory.watch.backend = "polling"`, a poller compares each root's (size, mtime) listing.
- Only memory document names count: MEMORY.md, `_system/`, dot files (the controller's temp files, editors'
  `.name.swp`) and editor leftovers (`name.md~`, `#name.md#`, `4913`) are not `<type>_<slug>.md` and are ignored.
- A burst of saves to one file is debounced: the file is reconciled once it has been quiet for
  `memory.watch.debounce` (or after `max_delay` of continuous saving), so it makes one decision.
- The watcher never writes the person's file: a reconcile reads it and records what it found.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.db import close_old_connections, connection

from compozy.config import compozy_home, get_config
from memory.domain.document import Limits
from memory.domain.enums import AgentTier, Scope
from memory.domain.models import ScopeRef
from memory.domain.names import is_memory_document_name
from memory.models import Workspace
from memory.store import files
from memory.store.roots import root_path
from memory.store.workspace import read_identity

from .core import exclusive
from .reconcile import reconcile_file

_log = logging.getLogger("compozy.memory.watcher")
REFRESH_ROOTS_S = 1.0


@dataclass(frozen=True)
class WatchedRoot:
    ref: ScopeRef
    path: Path


def administered_roots() -> list[WatchedRoot]:
    """Every root on this machine whose directory exists."""
    roots = [WatchedRoot(ScopeRef(scope=Scope.GLOBAL), root_path(ScopeRef(scope=Scope.GLOBAL), None))]
    agents = compozy_home() / "agents"
    if agents.is_dir():
        for agent in sorted(p.name for p in agents.iterdir() if (p / "memory").is_dir()):
            ref = ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.GLOBAL)
            roots.append(WatchedRoot(ref, root_path(ref, None)))
    for workspace_id, path in Workspace.objects.order_by("id").values_list("id", "path"):
        directory = Path(path)
        try:
            if read_identity(directory).id != workspace_id:
                continue
        except Exception:  # noqa: BLE001 - a moved or broken workspace is simply not watched
            continue
        ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=workspace_id)
        roots.append(WatchedRoot(ref, root_path(ref, directory)))
        agents_dir = directory / ".compozy" / "agents"
        if agents_dir.is_dir():
            for agent in sorted(p.name for p in agents_dir.iterdir() if (p / "memory").is_dir()):
                ref = ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.WORKSPACE,
                               workspace_id=workspace_id)
                roots.append(WatchedRoot(ref, root_path(ref, directory)))
    return [root for root in roots if root.path.is_dir()]


def watched_name(name: str) -> bool:
    return not name.startswith(".") and is_memory_document_name(name)


def _signature(path: Path) -> tuple[int, int, int] | None:
    """(size, mtime, inode) without following a link or opening the file (a FIFO never blocks a stat)."""
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


class Debouncer:
    """Collects changed files; a file is due once quiet for `quiet_s`, or `max_delay_s` after its first change."""

    def __init__(self, quiet_s: float, max_delay_s: float) -> None:
        self.quiet_s, self.max_delay_s = quiet_s, max_delay_s
        self._pending: dict[tuple[str, str], tuple[float, float]] = {}
        self._lock = threading.Lock()
        self.wake = threading.Event()

    def note(self, root_key: str, filename: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            first, _last = self._pending.get((root_key, filename), (now, now))
            self._pending[(root_key, filename)] = (first, now)
        self.wake.set()

    def due(self, now: float | None = None) -> list[tuple[str, str]]:
        now = time.monotonic() if now is None else now
        with self._lock:
            ready = [key for key, (first, last) in self._pending.items()
                     if now - last >= self.quiet_s or now - first >= self.max_delay_s]
            for key in ready:
                del self._pending[key]
        return sorted(ready)

    def next_deadline(self) -> float | None:
        with self._lock:
            if not self._pending:
                return None
            return min(min(last + self.quiet_s, first + self.max_delay_s) for first, last in self._pending.values())


class Watcher:
    def __init__(self, *, debounce_ms: int, max_delay_ms: int, backend: str, poll_interval_ms: int,
                 on_decision: Callable[[str], None] | None = None) -> None:
        self.debouncer = Debouncer(debounce_ms / 1000, max_delay_ms / 1000)
        self.backend = backend
        self.poll_interval = poll_interval_ms / 1000
        self.on_decision = on_decision
        self.stop_event = threading.Event()
        self.roots: dict[str, WatchedRoot] = {}
        self.by_dir: dict[str, WatchedRoot] = {}
        self._observer = None
        self._watches: dict[str, object] = {}
        self._listings: dict[str, dict[str, tuple[int, int] | None]] = {}
        # Files found invalid, by (root, name), with the (size, mtime, inode) they had then: the same file is not
        # read or logged again until it changes (otherwise a FIFO or a broken file under a memory name is logged
        # on every pass, for ever).
        self._invalid: dict[tuple[str, str], tuple[int, int, int] | None] = {}
        self.decisions = 0

    # --- the root set ----------------------------------------------------------------------------------------

    def refresh_roots(self) -> None:
        current = {root.ref.root_key: root for root in administered_roots()}
        for key, root in current.items():
            if key not in self.roots:
                self._watch(root)
        for key in [k for k in self.roots if k not in current]:
            self._unwatch(self.roots[key])
        self.roots = current
        self.by_dir = {str(root.path): root for root in current.values()}

    def _watch(self, root: WatchedRoot) -> None:
        if self._observer is not None:
            try:
                self._watches[root.ref.root_key] = self._observer.schedule(self._handler, str(root.path),
                                                                           recursive=False)
            except OSError as exc:  # inotify watch limit, for one: that root falls back to polling
                _log.warning("watching %s failed (%s); polling it instead", root.path, exc)
        listing = files.scan_root(root.path, with_stat=True).documents
        self._listings[root.ref.root_key] = listing
        # What changed before the watch began (while the service was down, or between the root's creation and
        # this refresh) is caught up: every file whose size or mtime differs from its catalog row, and every row
        # whose file is gone.
        with connection.cursor() as cursor:
            cursor.execute("SELECT filename, size, mtime_ns FROM memory_catalog_entries WHERE root_key = %s "
                           "AND is_system = 0", [root.ref.root_key])
            indexed = {name: (size, mtime) for name, size, mtime in cursor.fetchall()}
        for name in set(listing) | set(indexed):
            if listing.get(name) != indexed.get(name) and watched_name(name):
                self.debouncer.note(root.ref.root_key, name)

    def _unwatch(self, root: WatchedRoot) -> None:
        watch = self._watches.pop(root.ref.root_key, None)
        if watch is not None and self._observer is not None:
            self._observer.unschedule(watch)
        self._listings.pop(root.ref.root_key, None)

    # --- events ----------------------------------------------------------------------------------------------

    def path_changed(self, path: str) -> None:
        directory, name = os.path.split(path)
        root = self.by_dir.get(directory)
        if root is not None and watched_name(name):
            self.debouncer.note(root.ref.root_key, name)

    def poll_once(self) -> None:
        """The fallback: a root whose listing changed (a name added, gone, or with a new size or mtime)."""
        for key, root in list(self.roots.items()):
            if key in self._watches:
                continue
            listing = files.scan_root(root.path, with_stat=True).documents
            before = self._listings.get(key, {})
            for name in set(listing) | set(before):
                if listing.get(name) != before.get(name) and watched_name(name):
                    self.debouncer.note(key, name)
            self._listings[key] = listing

    def reconcile_due(self) -> None:
        for root_key, filename in self.debouncer.due():
            root = self.roots.get(root_key)
            if root is None:
                continue
            signature = _signature(root.path / filename)
            if self._invalid.get((root_key, filename), False) == signature:
                continue  # reported already, unchanged since
            self._invalid.pop((root_key, filename), None)
            if self._unchanged(root, filename):
                continue
            try:
                config = get_config(None)
                with exclusive(config):
                    result = reconcile_file(root.ref, root.path, filename,
                                            Limits(config.memory.file.max_lines, config.memory.file.max_bytes))
            except Exception:  # noqa: BLE001 - one bad file must not stop the watcher
                _log.exception("reconciling %s in %s failed", filename, root_key)
                continue
            if result.invalid_reason:
                self._invalid[(root_key, filename)] = signature
                _log.warning("%s in %s is not a valid memory file (%s); left as it is", filename, root_key,
                             result.invalid_reason)
            if result.decision is not None:
                self.decisions += 1
                if self.on_decision is not None:
                    self.on_decision(result.decision.id)

    @staticmethod
    def _unchanged(root: WatchedRoot, filename: str) -> bool:
        """The file still has its catalog row's size and mtime (the controller's own writes, mostly): nothing to
        record, and no need to take the write lock to find that out. reconcile_file checks again under it."""
        try:
            stat = os.lstat(root.path / filename)
            seen: tuple[int, int] | None = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            seen = None
        with connection.cursor() as cursor:
            cursor.execute("SELECT size, mtime_ns FROM memory_catalog_entries WHERE root_key = %s AND filename = %s",
                           [root.ref.root_key, filename])
            row = cursor.fetchone()
        return (tuple(row) if row else None) == seen

    # --- the loop --------------------------------------------------------------------------------------------

    def _start_observer(self) -> None:
        if self.backend == "polling":
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            _log.warning("watchdog is not installed; polling memory roots every %.1f s", self.poll_interval)
            return
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # noqa: ANN001
                # Opening and closing without writing change nothing; the watcher's own reads make them, and
                # counting them would re-read every invalid file on each of its own reads.
                if event.is_directory or event.event_type in ("opened", "closed_no_write"):
                    return
                watcher.path_changed(os.fsdecode(event.src_path))
                dest = getattr(event, "dest_path", "")
                if dest:
                    watcher.path_changed(os.fsdecode(dest))

        self._handler = Handler()
        self._observer = Observer()
        self._observer.start()

    def run(self) -> None:
        self._start_observer()
        last_refresh = last_poll = 0.0
        try:
            while not self.stop_event.is_set():
                now = time.monotonic()
                if now - last_refresh >= REFRESH_ROOTS_S:
                    close_old_connections()
                    self.refresh_roots()
                    last_refresh = now
                if now - last_poll >= self.poll_interval:
                    self.poll_once()
                    last_poll = now
                self.reconcile_due()
                deadline = self.debouncer.next_deadline()
                wait = min(self.poll_interval, REFRESH_ROOTS_S)
                if deadline is not None:
                    wait = max(0.01, min(wait, deadline - time.monotonic()))
                self.debouncer.wake.wait(wait)
                self.debouncer.wake.clear()
        finally:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)

    def stop(self) -> None:
        self.stop_event.set()
        self.debouncer.wake.set()
