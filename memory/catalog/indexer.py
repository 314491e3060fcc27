"""The projection from Markdown on disk to catalog rows, chunks and (through triggers) the FTS5 tables.

Incremental indexing after a write and a reindex from disk both derive rows with `entry_row`, so they end in
identical rows. The hot path uses plain SQL on Django's connection: one write costs a handful of statements.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from memory.domain.document import Document, body_fingerprint
from memory.domain.models import ScopeRef, sha256_text
from memory.domain.names import entity_key, is_system_path, parse_filename
from memory.domain.passages import passages

from . import sql, vectors
from .state import set_state_value, state_value

GENERATION_KEY = "generation"
# Bump when entry_row derives rows differently: the next reindex then re-derives every row instead of trusting
# rows whose file bytes are unchanged.
CATALOG_DERIVATION = 3  # 3: long bodies in passages, each chunk with its vector
DERIVATION_KEY = "catalog_derivation"

ENTRY_COLUMNS = (
    "root_key", "scope", "workspace_id", "agent_name", "agent_tier", "filename", "type", "slug", "entity_key",
    "name", "description", "body_key", "content_hash", "size", "mtime_ns", "is_system", "frontmatter",
    "origin_session", "created_at", "updated_at",
)
_FILENAME = ENTRY_COLUMNS.index("filename")
_NAME = ENTRY_COLUMNS.index("name")
_DESCRIPTION = ENTRY_COLUMNS.index("description")


@dataclass(frozen=True)
class DiskFile:
    filename: str
    text: str
    content_hash: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Row:
    """One derived catalog row (values in column order), its body and the body's passages (one chunk each)."""

    values: tuple[Any, ...]
    body: str
    chunks: tuple[str, ...]

    @property
    def filename(self) -> str:
        return self.values[_FILENAME]

    @property
    def name(self) -> str:
        return self.values[_NAME]

    @property
    def description(self) -> str:
        return self.values[_DESCRIPTION]


def _moment(value: str | None, fallback_ns: int) -> datetime:
    if value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.fromtimestamp(fallback_ns / 1e9, tz=UTC).replace(microsecond=0)


def entry_fields(ref: ScopeRef, disk: DiskFile, document: Document, *, hand_edited: bool = False) -> dict[str, Any]:
    """`hand_edited`: the file's content was last set by hand (its newest decision has origin file). A person who
    edits a file rarely touches its provenance, so the edit is dated by the file's mtime when that is later than the
    frontmatter's `updated_at`. Files the controller wrote keep the frontmatter's date: an import is dated by its
    source (Candidate.occurred_at), an extracted memory by its session, whatever the file's mtime."""
    front = document.frontmatter
    if is_system_path(disk.filename):
        # Machine-written artifacts (`_system/dreaming/20260101-run.md`) are named freely; their type is the
        # frontmatter's and their slug is their base name.
        slug = disk.filename.rsplit("/", 1)[-1].removesuffix(".md")
    else:
        _type, slug = parse_filename(disk.filename)
    provenance = front.provenance
    created = _moment(provenance.created_at if provenance else None, disk.mtime_ns)
    updated = _moment(provenance.updated_at if provenance else None, disk.mtime_ns)
    if hand_edited and disk.mtime_ns > 0:
        updated = max(updated, _moment(None, disk.mtime_ns))
    return {
        "root_key": ref.root_key,
        "scope": ref.scope.value,
        "workspace_id": ref.workspace_id,
        "agent_name": ref.agent_name,
        "agent_tier": ref.agent_tier.value if ref.agent_tier else "",
        "filename": disk.filename,
        "type": front.type.value,
        "slug": slug,
        "entity_key": entity_key(slug),
        "name": front.name,
        "description": front.description,
        "body_key": sha256_text(body_fingerprint(document.body)),
        "content_hash": disk.content_hash,
        "size": disk.size,
        "mtime_ns": disk.mtime_ns,
        "is_system": is_system_path(disk.filename),
        "frontmatter": front.yaml_dict(),
        "origin_session": provenance.source_sessions[0] if provenance and provenance.source_sessions else "",
        "created_at": created,
        "updated_at": max(updated, created),
    }


def entry_row(ref: ScopeRef, disk: DiskFile, document: Document, *, hand_edited: bool = False) -> Row:
    fields = entry_fields(ref, disk, document, hand_edited=hand_edited)
    adapt = connection.ops.adapt_datetimefield_value
    fields["frontmatter"] = json.dumps(fields["frontmatter"], sort_keys=True)
    fields["created_at"] = adapt(fields["created_at"])
    fields["updated_at"] = adapt(fields["updated_at"])
    fields["is_system"] = int(fields["is_system"])
    return Row(tuple(fields[column] for column in ENTRY_COLUMNS), document.body, tuple(passages(document.body)))


_INSERT_ENTRY = (
    f"INSERT INTO memory_catalog_entries ({', '.join(ENTRY_COLUMNS)}) "
    f"VALUES ({', '.join('%s' for _ in ENTRY_COLUMNS)}) "
    f"ON CONFLICT(root_key, filename) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in ENTRY_COLUMNS if c not in ("root_key", "filename"))
    + " RETURNING id"
)


_INSERT_CHUNK = ("INSERT INTO memory_chunks (entry_id, ordinal, name, description, body, vector, tokens, "
                 "vector_model) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")


def _chunk_texts(row: Row) -> list[str]:
    return [vectors.chunk_text(row.name, row.description, passage) for passage in row.chunks]


def upsert_rows(rows: Sequence[Row]) -> list[tuple[str, str] | None]:
    """Insert or replace rows. A memory's chunks are rewritten (and so re-indexed by the FTS triggers, and
    embedded again, all of the rows' chunks in one call) only when their text changed; unchanged chunks without a
    current vector get one. Returns, per row, the (name, description) it replaced, or None for a new row. The
    caller owns the transaction."""
    previous: list[tuple[str, str] | None] = []
    rewrite: list[tuple[int, Row, list[int]]] = []
    kept: list[int] = []
    with sql.cursor() as cursor:
        for row in rows:
            root_key, filename = row.values[0], row.values[_FILENAME]
            cursor.execute(
                "SELECT c.id, c.name, c.description, c.body FROM memory_catalog_entries e "
                "JOIN memory_chunks c ON c.entry_id = e.id WHERE e.root_key = %s AND e.filename = %s "
                "ORDER BY c.ordinal",
                [root_key, filename],
            )
            existing = cursor.fetchall()
            previous.append((existing[0][1], existing[0][2]) if existing else None)
            cursor.execute(_INSERT_ENTRY, list(row.values))
            entry_id = cursor.fetchone()[0]
            if [tuple(chunk[1:]) for chunk in existing] == [(row.name, row.description, text) for text in row.chunks]:
                kept.append(entry_id)
            else:
                # The upsert keeps an entry's id, so its chunks are the ones read above.
                rewrite.append((entry_id, row, [chunk[0] for chunk in existing]))
        blobs, sets, model = vectors.embed([text for _entry, row, _old in rewrite for text in _chunk_texts(row)])
        _rewrite_chunks(cursor, rewrite, blobs, sets, model)
    vectors.fill_missing(entry_ids=kept)
    return previous


_REWRITE_CHUNK = ("UPDATE memory_chunks SET id = %s, ordinal = %s, name = %s, description = %s, body = %s, "
                  "vector = %s, tokens = %s, vector_model = %s WHERE id = %s")


def _rewrite_chunks(cursor, rewrite: list[tuple[int, Row, list[int]]], blobs: list[bytes | None],  # noqa: ANN001
                    sets: list[bytes | None], model: str) -> None:
    """Write the rewritten memories' chunks: a passage where the memory had one at its ordinal rewrites that row,
    the others are inserted, and old rows past the new last passage are deleted.

    A rewritten passage always gets a new id (the caches of memory/catalog/owners.py and vectors.py `root_matrix`
    rely on a chunk id never changing its text or vector): the row is updated to an id above every id the table
    ever had, taken from its AUTOINCREMENT counter, which is moved past them (an UPDATE does not move it). One
    UPDATE fires the FTS5 triggers' delete and insert together; a DELETE then an INSERT cost about a third more in
    the trigram table, most of reconciling a pull of many changed memories."""
    updates: list[list[object]] = []
    inserts: list[list[object]] = []
    deletes: list[list[object]] = []
    position = 0
    for entry_id, row, old_ids in rewrite:
        for ordinal, passage in enumerate(row.chunks):
            values = [ordinal, row.name, row.description, passage, blobs[position], sets[position], model]
            position += 1
            if ordinal < len(old_ids):
                updates.append([*values, old_ids[ordinal]])
            else:
                inserts.append([entry_id, *values])
        deletes.extend([old] for old in old_ids[len(row.chunks):])
    if deletes:
        cursor.executemany("DELETE FROM memory_chunks WHERE id = %s", deletes)
    if updates:
        cursor.execute("SELECT (SELECT seq FROM sqlite_sequence WHERE name = 'memory_chunks'), "
                       "(SELECT max(id) FROM memory_chunks)")
        counter, top = cursor.fetchone()
        last = max(counter or 0, top or 0)
        cursor.executemany(_REWRITE_CHUNK, [[last + number, *update] for number, update in enumerate(updates, 1)])
        cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = 'memory_chunks'" if counter is not None
                       else "INSERT INTO sqlite_sequence (seq, name) VALUES (%s, 'memory_chunks')",
                       [last + len(updates)])
    if inserts:
        cursor.executemany(_INSERT_CHUNK, inserts)


_INSERT_NEW_ENTRY = (
    f"INSERT INTO memory_catalog_entries ({', '.join(ENTRY_COLUMNS)}) "
    f"VALUES ({', '.join('%s' for _ in ENTRY_COLUMNS)})"
)
_INSERT_NEW_CHUNK = (
    "INSERT INTO memory_chunks (entry_id, ordinal, name, description, body, vector, tokens, vector_model) "
    "SELECT id, %s, %s, %s, %s, %s, %s, %s FROM memory_catalog_entries WHERE root_key = %s AND filename = %s"
)


def insert_new_rows(rows: Sequence[Row]) -> None:
    """Insert rows known to be absent (a reindex's new files, a rebuild): two batched statements per batch."""
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 1000):
            batch = rows[start : start + 1000]
            cursor.executemany(_INSERT_NEW_ENTRY, [list(row.values) for row in batch])
            blobs, sets, model = vectors.embed([text for row in batch for text in _chunk_texts(row)])
            chunks = [(row, ordinal, passage) for row in batch for ordinal, passage in enumerate(row.chunks)]
            cursor.executemany(
                _INSERT_NEW_CHUNK,
                [[ordinal, row.name, row.description, passage, blob, tokens, model, row.values[0], row.filename]
                 for (row, ordinal, passage), blob, tokens in zip(chunks, blobs, sets, strict=True)],
            )


def delete_rows(root_key: str, filenames: Iterable[str]) -> int:
    """Remove rows by filename; chunks first, so the FTS delete triggers still see their text."""
    names = list(filenames)
    removed = 0
    with connection.cursor() as cursor:
        for start in range(0, len(names), 500):
            batch = names[start : start + 500]
            marks = ", ".join("%s" for _ in batch)
            cursor.execute(
                f"DELETE FROM memory_chunks WHERE entry_id IN (SELECT id FROM memory_catalog_entries "
                f"WHERE root_key = %s AND filename IN ({marks}))",
                [root_key, *batch],
            )
            cursor.execute(
                f"DELETE FROM memory_catalog_entries WHERE root_key = %s AND filename IN ({marks})", [root_key, *batch]
            )
            removed += cursor.rowcount
    return removed


def stored_rows(root_key: str, *, include_system: bool) -> dict[str, tuple[tuple[Any, ...], tuple[str, ...]]]:
    """The root's rows as {filename: (values in column order, chunk bodies by ordinal)}, for comparing with
    derived rows (`(row.values, row.chunks)`)."""
    system = "" if include_system else " AND e.is_system = 0"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join('e.' + c for c in ENTRY_COLUMNS)}, c.body FROM memory_catalog_entries e "
            f"LEFT JOIN memory_chunks c ON c.entry_id = e.id WHERE e.root_key = %s{system} ORDER BY e.id, c.ordinal",
            [root_key],
        )
        stored: dict[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {}
        for row in cursor.fetchall():
            filename = row[_FILENAME]
            values, chunks = stored.get(filename) or (tuple(_as_stored(value) for value in row[:-1]), ())
            stored[filename] = (values, chunks + ((row[-1],) if row[-1] is not None else ()))
        return stored


def _as_stored(value: Any) -> Any:
    """Undo the SQLite backend's column converters, so stored and derived rows compare as written."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, datetime):
        return str(value)
    return value


def advance_generation() -> None:
    with sql.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_state (key, value) VALUES (%s, 1) ON CONFLICT(key) DO UPDATE SET value = value + 1",
            [GENERATION_KEY],
        )


def derivation_current() -> bool:
    return state_value(DERIVATION_KEY) == CATALOG_DERIVATION


def mark_derivation_current() -> None:
    set_state_value(DERIVATION_KEY, CATALOG_DERIVATION)


def current_generation() -> int:
    return state_value(GENERATION_KEY) or 0


def index_entries(root_key: str) -> list[tuple[str, str, str]]:
    """(filename, name, description) of a root's curated entries, oldest first: MEMORY.md's content."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT filename, name, description FROM memory_catalog_entries "
            "WHERE root_key = %s AND is_system = 0 ORDER BY created_at, filename",
            [root_key],
        )
        return cursor.fetchall()
