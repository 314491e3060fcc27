"""Chunk vectors: derived like the rest of the catalog, stored beside each chunk with the model that made them.

- Indexing embeds every new or changed chunk in the same transaction that writes it, so a kill -9 never leaves a
  chunk without its vector (replay re-applies the whole write). When the embedder fails the chunk is stored
  without one; `fill_missing` (run by every reindex and every write of that memory) adds it later, and health
  reports chunks without a vector or with another model's.
- Search reads a root's vectors once per process and memory generation (`root_matrix`), never per query.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.db import connection

from compozy.config import get_config
from memory.providers.embeddings import Embedder, EmbedderError, get_embedder

logger = logging.getLogger(__name__)

DTYPE = np.float32


def embedder() -> Embedder | None:
    """The database's embedder: from the home config and the environment, never a workspace's."""
    return get_embedder(get_config())


def model_id() -> str:
    current = embedder()
    return current.model_id if current is not None else ""


def chunk_text(name: str, description: str, passage: str) -> str:
    """What a chunk's vector stands for: the memory's name and description (who or what it is about) and the
    passage."""
    return f"{name}\n{description}\n{passage}"


def embed(texts: Sequence[str]) -> tuple[list[bytes | None], list[bytes | None], str]:
    """(one float32 BLOB per text, its token set or None, the model id), or Nones and "" when there is no embedder
    or it failed. Token sets come from embedders with a token table (the local one), from the same tokenization."""
    current = embedder()
    if current is None or not texts:
        return [None] * len(texts), [None] * len(texts), ""
    try:
        with_tokens = getattr(current, "embed_with_tokens", None)
        if with_tokens is not None:
            matrix, sets = with_tokens(list(texts))
        else:
            matrix, sets = current.embed(list(texts)), [None] * len(texts)
    except EmbedderError as exc:
        logger.warning("chunks stored without vectors (health reports them; reindex adds them): %s", exc)
        return [None] * len(texts), [None] * len(texts), ""
    return [row.astype(DTYPE).tobytes() for row in matrix], list(sets), current.model_id


def has_tokens() -> bool:
    """Whether the configured embedder makes token sets (chunks stored before it did get them from fill_missing)."""
    return hasattr(embedder(), "embed_with_tokens")


def _stale_condition() -> str:
    """The condition of a chunk `fill_missing` embeds again, with one parameter, the configured model id."""
    return f"(c.vector IS NULL OR c.vector_model != %s{' OR c.tokens IS NULL' if has_tokens() else ''})"


def fill_missing(*, root_key: str | None = None, entry_ids: Sequence[int] = (), batch: int = 512,
                 limit: int | None = None) -> int:
    """Embed the chunks of a root (or of these entries) that have no vector or another model's, or no token set
    from an embedder that makes them; at most `limit` of them. The caller owns the transaction. Returns how many
    chunks got a vector."""
    if root_key is None and not entry_ids:
        return 0  # nothing to look at: answered before asking for the embedder (the config check costs more)
    current = model_id()
    if not current:
        return 0
    if root_key is not None:
        condition, params = "e.root_key = %s", [root_key]
    else:
        condition, params = f"e.id IN ({', '.join('%s' for _ in entry_ids)})", list(entry_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, c.name, c.description, c.body FROM memory_chunks c "
            f"JOIN memory_catalog_entries e ON e.id = c.entry_id WHERE {condition} AND {_stale_condition()}"
            f"{' ORDER BY c.id LIMIT %s' if limit is not None else ''}",
            [*params, current, *([limit] if limit is not None else [])],
        )
        pending = cursor.fetchall()
        filled = 0
        for start in range(0, len(pending), batch):
            part = pending[start : start + batch]
            blobs, sets, model = embed([chunk_text(name, description, body)
                                        for _id, name, description, body in part])
            if not model:
                break
            cursor.executemany("UPDATE memory_chunks SET vector = %s, tokens = %s, vector_model = %s WHERE id = %s",
                               [[blob, tokens, model, chunk_id]
                                for (chunk_id, *_rest), blob, tokens in zip(part, blobs, sets, strict=True)])
            filled += len(part)
    return filled


def stale_roots() -> list[str]:
    """The roots holding a chunk that `fill_missing` would embed again (no vector, another model's, or no token set
    from an embedder that makes them), by one statement; none without an embedder."""
    current = model_id()
    if not current:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT e.root_key FROM memory_chunks c JOIN memory_catalog_entries e ON e.id = c.entry_id "
            f"WHERE {_stale_condition()} ORDER BY e.root_key",
            [current],
        )
        return [root_key for (root_key,) in cursor.fetchall()]


@dataclass(frozen=True)
class VectorState:
    chunks: int
    missing: int
    other_model: int
    missing_tokens: int = 0  # chunks with a vector of the current model but no token set (stored before migration 0020)


def vector_state(root_key: str, *, include_system: bool = False) -> VectorState:
    """How many of a root's chunks have no vector, one from a model other than the configured one, or (with an
    embedder that makes them) no token set."""
    current = model_id()
    system = "" if include_system else " AND e.is_system = 0"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(c.vector IS NULL), 0), "
            "coalesce(sum(c.vector IS NOT NULL AND c.vector_model != %s), 0), "
            "coalesce(sum(c.vector IS NOT NULL AND c.vector_model = %s AND c.tokens IS NULL), 0) FROM memory_chunks c "
            f"JOIN memory_catalog_entries e ON e.id = c.entry_id WHERE e.root_key = %s{system}",
            [current, current, root_key],
        )
        chunks, missing, other, untokenized = cursor.fetchone()
    if not current:
        return VectorState(int(chunks), 0, 0)
    return VectorState(int(chunks), int(missing), int(other), int(untokenized) if has_tokens() else 0)


@dataclass(frozen=True)
class RootVectors:
    """A root's chunk vectors as one matrix, with each row's chunk id, entry id, system flag and token set (bytes
    of uint16 ids, b"" for none)."""

    matrix: np.ndarray
    chunk_ids: np.ndarray
    entry_ids: np.ndarray
    system: np.ndarray
    tokens: np.ndarray  # object array of bytes


_FIELDS = ("matrix", "chunk_ids", "entry_ids", "system", "tokens")


_cache: dict[tuple[str, str, str], tuple[int, RootVectors]] = {}
_cache_lock = threading.Lock()


def forget_matrices() -> None:
    """Drop the cached matrices (tests: each test's rollback makes generation numbers and chunk ids repeat)."""
    with _cache_lock:
        _cache.clear()


def _read(cursor, root_key: str, model: str, chunk_ids: list[int] | None) -> list[tuple]:  # noqa: ANN001
    sql = ("SELECT c.id, c.entry_id, e.is_system, c.vector, c.tokens FROM memory_catalog_entries e "
           "CROSS JOIN memory_chunks c ON c.entry_id = e.id "
           "WHERE e.root_key = %s AND c.vector_model = %s AND c.vector IS NOT NULL")
    params: list[object] = [root_key, model]
    if chunk_ids is not None:
        sql += " AND c.id IN (SELECT value FROM json_each(%s))"
        params.append(json.dumps(chunk_ids))
    cursor.execute(sql + " ORDER BY c.id", params)
    return cursor.fetchall()


def _build(rows: list[tuple], size: int | None) -> RootVectors:
    width = size or (len(rows[0][3]) // np.dtype(DTYPE).itemsize if rows else 0)
    rows = [row for row in rows if len(row[3]) == width * np.dtype(DTYPE).itemsize]
    matrix = (np.frombuffer(b"".join(bytes(row[3]) for row in rows), dtype=DTYPE).reshape(len(rows), width)
              if rows else np.zeros((0, width), dtype=DTYPE))
    tokens = np.empty(len(rows), dtype=object)
    tokens[:] = [bytes(row[4]) if row[4] is not None else b"" for row in rows]
    return RootVectors(matrix, np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
                       np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows)),
                       np.fromiter((bool(row[2]) for row in rows), dtype=bool, count=len(rows)), tokens)


def root_matrix(root_key: str, generation: int, current: str) -> RootVectors:
    """The root's vectors of model `current`, read once per (database, root, model) and generation. After a
    write only the difference is read: the chunk ids of the root (a rewritten chunk gets a new id, so ids say
    everything), then the vectors of the new ones."""
    key = (str(connection.settings_dict["NAME"]), root_key, current)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == generation:
        return cached[1]
    with connection.cursor() as cursor:
        if cached is None or not len(cached[1].chunk_ids):
            vectors = _build(_read(cursor, root_key, current, None), None)
        else:
            previous = cached[1]
            cursor.execute("SELECT c.id FROM memory_catalog_entries e CROSS JOIN memory_chunks c "
                           "ON c.entry_id = e.id WHERE e.root_key = %s AND c.vector_model = %s "
                           "AND c.vector IS NOT NULL", [root_key, current])
            now = np.fromiter((row[0] for row in cursor.fetchall()), dtype=np.int64)
            now.sort()
            keep = np.isin(previous.chunk_ids, now, assume_unique=True)
            if has_tokens():
                # A chunk stored before its embedder made token sets gets one from fill_missing, keeping its id.
                keep &= previous.tokens != b""
            added = now[~np.isin(now, previous.chunk_ids[keep], assume_unique=True)]
            fresh = _build(_read(cursor, root_key, current, added.tolist()), previous.matrix.shape[1]) \
                if len(added) else None
            parts = [RootVectors(*(getattr(previous, name)[keep] for name in _FIELDS))] + (
                [fresh] if fresh is not None else [])
            merged = RootVectors(*(np.concatenate([getattr(part, name) for part in parts]) for name in _FIELDS))
            order = np.argsort(merged.chunk_ids, kind="stable")  # sorted ids: lookups by searchsorted
            vectors = RootVectors(*(getattr(merged, name)[order] for name in _FIELDS))
    with _cache_lock:
        _cache[key] = (generation, vectors)
    return vectors
