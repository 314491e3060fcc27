"""The token-match list: the lexical and semantic lists' candidates ranked again, by which of the question's tokens
each passage holds or holds a near neighbour of (late interaction over the static model's token vectors).

Why: the semantic list averages a passage's token vectors, which throws away which words met; on long technical
text the mean of many frequent tokens points everywhere at once. Here each question token (without stopwords and
punctuation, case kept) looks for itself or a near neighbour in the passage, so related words count too: a soft
bm25. A passage scores the idf-weighted mean, over the question's tokens, of the best match it holds; a memory
scores its best passage. The idf is counted among the candidates' passages, so it adapts to each question and to
each body of text without corpus statistics.

Why it is cheap: every vocabulary token's neighbours (its nearest tokens by the cosine of WordLlama's unit rows)
form a table derived from the model alone, built once per home and kept in its cache (`neighbour_table`). Scoring
is then a gather of the candidates' stored token sets (`memory_chunks.tokens`) from a small table of the question
tokens' neighbours and a maximum per passage: no token vector is read at question time. A token that is not among
a question token's neighbours counts as no match.
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compozy.config import compozy_home
from compozy.home import private_dir, write_private
from memory.domain.text import STOPWORDS
from memory.providers.embeddings import TOKEN_DTYPE, LocalEmbedder

# A question token matches the NEIGHBOURS nearest vocabulary tokens whose cosine with it is at least MIN_COSINE
# (itself first, at 1): its case and spacing variants, its inflections and close relatives, not its whole topic.
# Round numbers; a median token has 16 such neighbours, one in ten 44 or more.
NEIGHBOURS = 32
MIN_COSINE = 0.3
_STEPS = 255  # a cosine in 255ths while a question is scored
_BATCH = 1024  # vocabulary rows per matrix product while the table is built (128 MB of similarities at a time)

_lock = threading.Lock()
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NeighbourTable:
    """Every vocabulary token's neighbours, one row per token, NEIGHBOURS columns, nearest first: their ids (uint16)
    and cosines (float16; 0 past the token's last neighbour)."""

    ids: np.ndarray
    cosines: np.ndarray


_tables: dict[str, NeighbourTable] = {}  # by model id: one table per process


def question_token_ids(embedder: LocalEmbedder, text: str) -> list[int]:
    """The question's distinct meaningful tokens: not stopwords, holding a letter or a digit."""
    seen: dict[int, None] = {}
    for token, piece in embedder.question_tokens(text):
        word = piece.lower()
        if word in STOPWORDS or not any(character.isalnum() for character in word):
            continue
        seen.setdefault(token, None)
    return list(seen)


def table_path(model_id: str) -> Path:
    """Where this model's neighbour table is kept: the home's `cache/`, or $COMPOZY_CACHE_DIR (it derives from the
    model and the two settings alone, so homes may share one)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)
    folder = os.environ.get("COMPOZY_CACHE_DIR") or compozy_home() / "cache"
    return Path(folder) / f"token-neighbours-{slug}-{NEIGHBOURS}-{MIN_COSINE}.npz"


def neighbour_table(embedder: LocalEmbedder) -> NeighbourTable:
    """The model's neighbour table: kept per process, read from the home's cache, or built there when missing or
    unreadable (about 2 s on two cores, once per home; `compozy serve` builds it at start-up, in the background)."""
    with _lock:
        found = _tables.get(embedder.token_model_id)
        if found is not None:
            return found
        path = table_path(embedder.token_model_id)
        try:
            with np.load(path) as stored:
                found = NeighbourTable(stored["ids"], stored["cosines"])
            if found.ids.shape != (LocalEmbedder.vocabulary_size(), NEIGHBOURS):
                raise ValueError("a table of another shape")
        except (OSError, KeyError, ValueError):
            logger.info("building recall's token neighbour table (once, a few seconds) in %s", path.parent)
            found = build_table(LocalEmbedder.unit_table())
            buffer = io.BytesIO()
            np.savez(buffer, ids=found.ids, cosines=found.cosines)
            private_dir(path.parent)
            write_private(path, buffer.getvalue())
        _tables[embedder.token_model_id] = found
        return found


def build_table(unit: np.ndarray) -> NeighbourTable:
    """Each token's neighbours from its cosine with every token (`unit`: unit rows), _BATCH tokens at a time.

    Cosine is symmetric, so each batch of rows is multiplied only by the rows from its own first one on (half the
    products of the whole square: the matrix product is most of the build), and each pair found beyond the batch
    counts for both of its tokens. The tokens at MIN_COSINE or more are few (a median of 16 of 32,000), so they are
    picked by a comparison and one sort of the few, not by a partition of every row (three times as long), and
    found in the flattened comparison (a row-and-column `nonzero` of it took as long as the products)."""
    size = unit.shape[0]
    found_rows: list[np.ndarray] = []
    found_columns: list[np.ndarray] = []
    found_values: list[np.ndarray] = []
    for start in range(0, size, _BATCH):
        stop = min(start + _BATCH, size)
        similarity = unit[start:stop] @ unit[start:].T
        flat = np.flatnonzero(similarity >= MIN_COSINE)
        rows, columns = np.divmod(flat, similarity.shape[1])
        values = similarity.ravel()[flat]
        rows += start
        columns += start
        beyond = columns >= stop  # the pair's other token is a later batch's row: it gets the pair from here
        found_rows += [rows, columns[beyond]]
        found_columns += [columns, rows[beyond]]
        found_values += [values, values[beyond]]
    rows, columns, values = (np.concatenate(parts) for parts in (found_rows, found_columns, found_values))
    order = np.lexsort((columns, -values, rows))  # by token, nearest first, then by id
    rows, columns, values = rows[order], columns[order], values[order]
    rank = np.arange(len(rows)) - np.searchsorted(rows, np.arange(size))[rows]
    keep = rank < NEIGHBOURS
    ids = np.zeros((size, NEIGHBOURS), dtype=TOKEN_DTYPE)
    cosines = np.zeros((size, NEIGHBOURS), dtype=np.float16)
    ids[rows[keep], rank[keep]] = columns[keep]
    cosines[rows[keep], rank[keep]] = values[keep]
    return NeighbourTable(ids, cosines)


@dataclass(frozen=True)
class TokenMatch:
    """Each candidate memory's score (its best passage's) and that passage's chunk id."""

    scores: dict[int, float]
    chunks: dict[int, int]


def score_passages(near: NeighbourTable, question: Sequence[int], sets: Sequence[bytes]) -> np.ndarray:
    """Each passage's score in [0, 1]: the idf-weighted mean over the question's tokens of the best cosine the
    passage holds among each token's neighbours (0 for a passage holding none). `sets` are uint16 token-id bytes."""
    width = np.dtype(TOKEN_DTYPE).itemsize
    lengths = np.fromiter((len(item) for item in sets), dtype=np.int64, count=len(sets)) // width
    out = np.zeros(len(sets), dtype=np.float64)
    if not question or not len(sets) or not lengths.any():
        return out
    nonempty = np.flatnonzero(lengths)
    ids = np.frombuffer(b"".join(sets[index] for index in nonempty), dtype=TOKEN_DTYPE)
    starts = np.concatenate(([0], np.cumsum(lengths[nonempty])[:-1]))
    # One row per vocabulary token: its cosine with each question token it neighbours, 0 elsewhere (rows, so that
    # gathering a candidate token's cosines reads one short row, not a cell of each of several long rows), in
    # 255ths: the maximum per passage over bytes takes half the time it takes over floats.
    table = np.zeros((near.ids.shape[0], len(question)), dtype=np.uint8)
    for column, token in enumerate(question):
        table[near.ids[token], column] = np.rint(near.cosines[token].astype(np.float32) * _STEPS)
        table[token, column] = _STEPS  # itself, whatever the rounding of its own cosine
    table[0] = 0.0  # a short row's unused columns point at token 0 with cosine 0; token 0 is never a neighbour
    member = np.zeros(near.ids.shape[0], dtype=bool)
    member[near.ids[list(question)].ravel()] = True
    member[list(question)] = True
    member[0] = False
    # Only the candidates' tokens that neighbour some question token are looked at: where they are, which passage
    # holds each (the sets are concatenated in passage order, so positions come passage by passage), and each
    # passage's best cosine per question token over them.
    positions = np.flatnonzero(member[ids])
    if not len(positions):
        return out
    passage = np.searchsorted(starts, positions, side="right") - 1
    first = np.flatnonzero(np.concatenate(([True], passage[1:] != passage[:-1])))
    steps = np.zeros((len(nonempty), len(question)), dtype=np.uint8)  # passages x question tokens
    steps[passage[first]] = np.maximum.reduceat(table[ids[positions]], first, axis=0)
    best = steps.astype(np.float32) / _STEPS
    # A question token's document frequency among these passages: those holding the token itself (cosine 1).
    held = (best >= 1.0).sum(axis=0)
    idf = np.log1p((len(nonempty) - held + 0.5) / (held + 0.5))
    out[nonempty] = (best @ idf) / idf.sum()
    return out


def token_match(embedder: LocalEmbedder, question_text: str, entry_ids: Sequence[int],
                roots: Sequence[object]) -> TokenMatch | None:
    """Score the memories `entry_ids` by their passages in `roots` (vectors.RootVectors of the visible roots);
    None when the question has no meaningful token."""
    question = question_token_ids(embedder, question_text)
    if not question or not entry_ids:
        return None
    wanted = np.fromiter(entry_ids, dtype=np.int64, count=len(entry_ids))
    sets: list[bytes] = []
    owners: list[np.ndarray] = []
    chunk_ids: list[np.ndarray] = []
    for root in roots:
        rows = np.flatnonzero(np.isin(root.entry_ids, wanted))  # type: ignore[attr-defined]
        if len(rows):
            sets.extend(root.tokens[rows].tolist())  # type: ignore[attr-defined]
            owners.append(root.entry_ids[rows])  # type: ignore[attr-defined]
            chunk_ids.append(root.chunk_ids[rows])  # type: ignore[attr-defined]
    if not sets:
        return None
    passage_scores = score_passages(neighbour_table(embedder), question, sets)
    entries = np.concatenate(owners).tolist()
    chunks = np.concatenate(chunk_ids).tolist()
    scores: dict[int, float] = {}
    best_chunk: dict[int, int] = {}
    for value, entry, chunk in zip(passage_scores.tolist(), entries, chunks, strict=True):
        if value > scores.get(entry, -math.inf):
            scores[entry] = value
            best_chunk[entry] = chunk
    return TokenMatch(scores, best_chunk)
