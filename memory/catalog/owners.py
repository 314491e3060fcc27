"""Which memory and root each chunk belongs to, kept per process, so recall can tell which FTS5 hits are visible
without a statement per candidate list.

The FTS5 ranking runs over every root's chunks; recall keeps the hits of the roots the caller may see. Asking the
database which hits those are cost two index seeks a hit (about a tenth of a question's time). Chunk ids come from
an AUTOINCREMENT key, so they are never reused, and a chunk never moves to another memory (a rewritten passage
takes a new id above every earlier one: indexer.upsert_rows): what is known about an id stays true while the
chunk exists, and a deleted chunk is never an FTS5 hit again. So a root's chunks are read once per process
(`root_key` index), and after a write only the chunks added since (`id` range) are read. Hits newer than what
was read (a write that committed after the memory generation was read) are asked of the database, so the answer is
always the database's.

Like the other per-generation caches, this trusts that ids and generations only move forward; tests, which roll
every transaction back, call `forget_owners`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import numpy as np
from django.db import connection


@dataclass
class _Root:
    ids: np.ndarray  # chunk ids, sorted
    entries: np.ndarray
    system: np.ndarray
    memories: int = 0  # distinct entries (system files too)


@dataclass
class _Database:
    generation: int
    upto: int  # every chunk with an id up to this one is known, for the roots loaded
    roots: dict[str, _Root] = field(default_factory=dict)


_cache: dict[str, _Database] = {}
_lock = threading.Lock()


def forget_owners() -> None:
    """Drop what is known (tests: each test's rollback makes chunk ids and generation numbers repeat)."""
    with _lock:
        _cache.clear()


def _root(rows: list[tuple[int, int, int]]) -> _Root:
    count = len(rows)
    entries = np.fromiter((row[1] for row in rows), dtype=np.int64, count=count)
    return _Root(np.fromiter((row[0] for row in rows), dtype=np.int64, count=count), entries,
                 np.fromiter((bool(row[2]) for row in rows), dtype=bool, count=count), len(np.unique(entries)))


def _refresh(cursor, generation: int, root_keys: list[str]) -> _Database:  # noqa: ANN001
    key = str(connection.settings_dict["NAME"])
    with _lock:
        state = _cache.get(key)
    if state is None or state.generation != generation:
        cursor.execute("SELECT coalesce(max(id), 0) FROM memory_chunks")
        top = int(cursor.fetchone()[0])
    if state is None:
        state = _Database(generation, top)
    elif state.generation != generation:
        # Only the chunks added since: a range of the primary key, whatever the size of the catalog.
        cursor.execute("SELECT c.id, c.entry_id, e.is_system, e.root_key FROM memory_chunks c "
                       "CROSS JOIN memory_catalog_entries e ON e.id = c.entry_id "
                       "WHERE c.id > %s AND c.id <= %s ORDER BY c.id", [state.upto, top])
        added: dict[str, list[tuple[int, int, int]]] = {}
        for chunk, entry, system, root_key in cursor.fetchall():
            added.setdefault(root_key, []).append((chunk, entry, system))
        roots = dict(state.roots)
        for root_key, rows in added.items():
            if root_key in roots:
                old, new = roots[root_key], _root(rows)
                ids, entries, system = (np.concatenate([getattr(old, name), getattr(new, name)])
                                        for name in ("ids", "entries", "system"))
                roots[root_key] = _Root(ids, entries, system, len(np.unique(entries)))
        state = _Database(generation, top, roots)
    missing = [root_key for root_key in root_keys if root_key not in state.roots]
    if missing:
        roots = dict(state.roots)
        for root_key in missing:
            cursor.execute("SELECT c.id, c.entry_id, e.is_system FROM memory_catalog_entries e "
                           "CROSS JOIN memory_chunks c ON c.entry_id = e.id "
                           "WHERE e.root_key = %s AND c.id <= %s ORDER BY c.id", [root_key, state.upto])
            roots[root_key] = _root(cursor.fetchall())
        state = _Database(state.generation, state.upto, roots)
    with _lock:
        _cache[key] = state
    return state


@dataclass(frozen=True)
class Owners:
    """The chunks of some roots, at one memory generation."""

    roots: tuple[_Root, ...]
    upto: int
    root_keys: tuple[str, ...]

    @property
    def memories(self) -> int:
        """How many memories these roots held at this generation (system files too)."""
        return sum(root.memories for root in self.roots)

    def holding_memories(self) -> list[str]:
        """The roots that held any memory (a chunk of a file other than a system file) at this generation: what
        recall looks shadowing holders up in (a memory written after the generation was read counts from the next
        search on, like every other per-generation answer)."""
        return [root_key for root_key, root in zip(self.root_keys, self.roots, strict=True)
                if len(root.system) and not root.system.all()]

    def visible(self, cursor, chunk_ids: list[int], *, include_system: bool) -> dict[int, int]:  # noqa: ANN001
        """{chunk id: entry id} for the chunks of these roots (without system files unless `include_system`)."""
        wanted = np.fromiter(chunk_ids, dtype=np.int64, count=len(chunk_ids))
        found: dict[int, int] = {}
        for root in self.roots:
            if not len(root.ids):
                continue
            where = np.minimum(np.searchsorted(root.ids, wanted), len(root.ids) - 1)
            hit = root.ids[where] == wanted
            if not include_system:
                hit &= ~root.system[where]
            found.update(zip(wanted[hit].tolist(), root.entries[where[hit]].tolist(), strict=True))
        newer = [chunk for chunk in chunk_ids if chunk > self.upto]
        if newer:
            # Committed after the generation was read: the database says whose they are.
            system = "" if include_system else " AND e.is_system = 0"
            cursor.execute("SELECT c.id, c.entry_id FROM memory_chunks c CROSS JOIN memory_catalog_entries e "
                           "ON e.id = c.entry_id WHERE c.id IN (SELECT value FROM json_each(%s)) "
                           f"AND e.root_key IN (SELECT value FROM json_each(%s)){system}",
                           [json.dumps(newer), json.dumps(list(self.root_keys))])
            found.update(cursor.fetchall())
        return found


def owners(cursor, root_keys: list[str], generation: int) -> Owners:  # noqa: ANN001
    """The owners of the chunks of `root_keys` at `generation` (read once per process, then by difference)."""
    key = str(connection.settings_dict["NAME"])
    with _lock:
        state = _cache.get(key)
    if state is None or state.generation != generation or any(root not in state.roots for root in root_keys):
        state = _refresh(cursor, generation, root_keys)
    return Owners(tuple(state.roots[root] for root in root_keys), state.upto, tuple(root_keys))
