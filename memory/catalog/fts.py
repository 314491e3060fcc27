"""The only place with FTS5 SQL. User text reaches MATCH only through `match_expression`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .owners import Owners

UNICODE_TABLE = "memory_fts_unicode"
TRIGRAM_TABLE = "memory_fts_trigram"


# The word index stems English words (porter over unicode61): a question's "exceptions" finds a memory's "exception",
# "configured" its "configuration". On long technical text an unstemmed word index fell 7.5-10 points of R@5 below
# plain porter bm25, and its own stem-prefix queries recovered only part of that (docs/benchmarks.md, the Go docs
# set). Words that are not plain ASCII letters are indexed as unicode61 leaves them.
WORD_TOKENIZER = "porter unicode61 remove_diacritics 2"
UNSTEMMED_WORD_TOKENIZER = "unicode61 remove_diacritics 2"  # before migration 0019


def drop_table_sql(table: str) -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {table}_{suffix}" for suffix in ("ai", "ad", "au")] + [
        f"DROP TABLE IF EXISTS {table}"]


def create_table_sql(table: str, tokenizer: str) -> list[str]:
    """An external-content FTS5 table over memory_chunks and the triggers that keep it in step."""
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5(name, description, body, content='memory_chunks', "
        f"content_rowid='id', tokenize=\"{tokenizer}\")",
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON memory_chunks BEGIN "
        f"INSERT INTO {table}(rowid, name, description, body) "
        f"VALUES (new.id, new.name, new.description, new.body); END",
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON memory_chunks BEGIN "
        f"INSERT INTO {table}({table}, rowid, name, description, body) "
        f"VALUES ('delete', old.id, old.name, old.description, old.body); END",
        # Only the text columns: storing a chunk's vector must not re-index its text.
        f"CREATE TRIGGER {table}_au AFTER UPDATE OF name, description, body ON memory_chunks BEGIN "
        f"INSERT INTO {table}({table}, rowid, name, description, body) "
        f"VALUES ('delete', old.id, old.name, old.description, old.body); "
        f"INSERT INTO {table}(rowid, name, description, body) "
        f"VALUES (new.id, new.name, new.description, new.body); END",
    ]


# Compaction. FTS5 keeps each index as a set of b-trees (segments): every write transaction adds one, and its
# automerge joins them only four at a time per level, so an index written memory by memory, or built by a reindex
# in batches, is made of 5-16 of them. Every term of every question is then looked up in each one: at 1,000 bench
# memories in 16 segments the word index's ranked statement took 0.35 ms and the trigram index's 1.15 ms at p50,
# in one segment 0.16 and 0.13 ms (the same rows and scores; docs/benchmarks.md, stop 43). Merging changes what
# the index holds nowhere, only its layout, so no memory generation advances.
MEMORY_INDEXES = (UNICODE_TABLE, TRIGRAM_TABLE)
# Leaf pages (FTS5's pgsz, 1,000 bytes) written by one merge step: a few milliseconds of work under the write lock.
MERGE_PAGES = 500


def segment_count(cursor, table: str) -> int:  # noqa: ANN001
    """How many b-trees the index is made of: `<table>_idx` holds a row per leaf page boundary of each."""
    cursor.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx")
    return int(cursor.fetchone()[0])


def merge_step(cursor, table: str, *, first: bool) -> bool:  # noqa: ANN001
    """One bounded step of merging the index into one b-tree (FTS5's incremental 'optimize'): the first step
    (negative pages) puts every b-tree on one level and starts the merge, later ones carry it on. True when it did
    work; FTS5 reports work by two or more changes. Each step may be its own transaction."""
    before = _total_changes(cursor)
    cursor.execute(f"INSERT INTO {table}({table}, rank) VALUES('merge', %s)", [-MERGE_PAGES if first else MERGE_PAGES])
    return _total_changes(cursor) - before >= 2


def _total_changes(cursor) -> int:  # noqa: ANN001
    cursor.execute("SELECT total_changes()")
    return int(cursor.fetchone()[0])


# What migration 0002 created; 0019 rebuilds the word index with WORD_TOKENIZER.
CREATE_SQL = create_table_sql(UNICODE_TABLE, UNSTEMMED_WORD_TOKENIZER) + create_table_sql(TRIGRAM_TABLE, "trigram")
DROP_SQL = drop_table_sql(UNICODE_TABLE) + drop_table_sql(TRIGRAM_TABLE)


def _rows(cursor, sql: str, params: list[object]) -> list[tuple]:  # noqa: ANN001
    """All rows of a read statement. Recall hands in `memory.catalog.sql`'s cursor, which skips Django's
    per-statement layers (about ten statements a question); any cursor with execute and fetchall works."""
    cursor.execute(sql, params)
    return cursor.fetchall()


def quote_term(term: str) -> str:
    """An FTS5 string literal: the term is data, never syntax."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: list[str]) -> str | None:
    """OR-joined quoted terms. Returns None when nothing is left to match."""
    quoted = [quote_term(term) for term in terms if term and "\x00" not in term]
    return " OR ".join(quoted) if quoted else None


def overlap_candidates(cursor, *, root_key: str, memory_type: str, terms: list[str], limit: int) -> list[tuple]:
    """Entries of one root and type sharing any of `terms`, best bm25 first (by their best passage):
    (entry_id, filename, name, description, body)."""
    expression = match_expression(terms)
    if expression is None:
        return []
    cursor.execute(
        f"""
        SELECT e.id, e.filename, e.name, e.description
        FROM {UNICODE_TABLE} f
        JOIN memory_chunks c ON c.id = f.rowid
        JOIN memory_catalog_entries e ON e.id = c.entry_id
        WHERE {UNICODE_TABLE} MATCH %s AND e.root_key = %s AND e.type = %s AND e.is_system = 0
        ORDER BY bm25({UNICODE_TABLE}) LIMIT %s
        """,
        [expression, root_key, memory_type, limit * 4],
    )
    best: dict[int, tuple] = {}
    for row in cursor.fetchall():
        best.setdefault(row[0], row)  # rows come best first: an entry's first row is its best passage
    found = list(best.values())[:limit]
    bodies = entry_bodies(cursor, [row[0] for row in found])
    return [(*row, bodies.get(row[0], "")) for row in found]


_ENTRY_BODIES_SQL = ("SELECT entry_id, body FROM memory_chunks WHERE entry_id IN (SELECT value FROM json_each(%s)) "
                     "ORDER BY entry_id, ordinal")


def entry_bodies(cursor, entry_ids: list[int]) -> dict[int, str]:  # noqa: ANN001
    """Each entry's whole body: its chunks' passages joined in order (they are exact slices of the body)."""
    if not entry_ids:
        return {}
    bodies: dict[int, list[str]] = {}
    for entry, passage in _rows(cursor, _ENTRY_BODIES_SQL, [json.dumps(list(entry_ids))]):
        bodies.setdefault(entry, []).append(passage)
    return {entry: "".join(parts) for entry, parts in bodies.items()}


# bm25 column weights (name, description, body): a word in a memory's name says more about it than one in its body.
UNICODE_WEIGHTS = (3.0, 2.0, 1.0)
TRIGRAM_WEIGHTS = (3.0, 2.0, 1.0)

# `passage` is the text of the entry's best-matching chunk (its first, for rows looked up by entry id): recall
# scores and cuts snippets from passages and reads whole bodies only for the memories it returns.
# `recall_signal` is the memory's recall EMA (memory_recall_signals.recall_score, None before its first recall), read
# with the row by one index seek rather than by a statement of its own.
RECALL_COLUMNS = ("entry_id", "bm25", "snippet", "root_key", "scope", "workspace_id", "agent_name", "agent_tier",
                  "filename", "type", "slug", "name", "description", "passage", "updated_at", "created_at", "size",
                  "content_hash", "is_system", "origin_session", "chunk_id", "recall_signal")


@dataclass(eq=False)
class RecallRow:
    """One row of RECALL_COLUMNS, typed (`RecallRow(*values)`). A stub (a ranking fetched with `stubs=True`, or a
    memory the other list already read) holds only entry_id, bm25 and chunk_id; a ranking row (RANKING_COLUMNS,
    `ranking_row`) only what ranks a memory. Either has no passage until read whole. `body` is the whole body,
    set only for the memories recall returns; `strength` is set by recall."""

    entry_id: int
    bm25: float | None = None
    snippet: str | None = None
    root_key: str | None = None
    scope: str | None = None
    workspace_id: str | None = None
    agent_name: str | None = None
    agent_tier: str | None = None
    filename: str | None = None
    type: str | None = None
    slug: str | None = None
    name: str | None = None
    description: str | None = None
    passage: str | None = None
    updated_at: datetime | None = None
    created_at: datetime | None = None
    size: int | None = None
    content_hash: str | None = None
    is_system: bool | None = None
    origin_session: str | None = None
    chunk_id: int | None = None
    recall_signal: float | None = None
    body: str | None = None
    # Recall's: how strongly the list that found it matched, relative to that list's best match (1.0).
    strength: float = 0.0


def ranking_row(values: tuple) -> RecallRow:
    """A RecallRow from a row of RANKING_COLUMNS."""
    chunk_id, entry_id, root_key, filename, updated_at, recall_signal = values
    return RecallRow(entry_id, root_key=root_key, filename=filename, updated_at=updated_at, chunk_id=chunk_id,
                     recall_signal=recall_signal)


def match_counts(cursor, table: str, expressions: list[str], cap: int) -> list[int]:  # noqa: ANN001
    """How many documents of an index (UNICODE_TABLE or TRIGRAM_TABLE) match each expression, counted up to `cap`
    (the scan stops there, so a common term stays cheap); one statement for all the terms of a question."""
    if not expressions:
        return []
    parts = [f"(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH %s LIMIT %s))" for _ in expressions]
    cursor.execute("SELECT " + ", ".join(parts), [value for expression in expressions for value in (expression, cap)])
    return [int(value) for value in cursor.fetchone()]


def document_count(cursor) -> int:
    cursor.execute("SELECT count(*) FROM memory_chunks")
    return int(cursor.fetchone()[0])


# The ranked FTS5 query runs alone first (joining every match to its catalog row costs more than the ranking),
# over-fetching this many times the pool; catalog rows are then read for those hits only. When the visible roots
# hold fewer memories than the pool, that ranking could never fill it and is followed by the one within the roots
# whenever the over-fetched hits are all taken, so recall asks the one within the roots at once (`scoped`).
OVERFETCH = 4
_ROW_COLUMNS = (
    "SELECT c.id, e.id, e.root_key, e.scope, e.workspace_id, e.agent_name, e.agent_tier, e.filename, e.type, e.slug, "
    "e.name, e.description, c.body, e.updated_at, e.created_at, e.size, e.content_hash, e.is_system, "
    "e.origin_session, c.id, "
    "(SELECT s.recall_score FROM memory_recall_signals s WHERE s.root_key = e.root_key AND s.filename = e.filename) "
)


_VISIBLE_SQL = ("SELECT c.id, c.entry_id FROM memory_chunks c CROSS JOIN memory_catalog_entries e ON e.id = c.entry_id "
                "WHERE c.id IN (SELECT value FROM json_each(%s)) AND e.root_key IN ({roots}){system}")


# FTS5's bm25 constants (fixed in its source): a phrase adds idf·f·(k1+1)/(f + k1·(1 - b + b·D/avgdl)) to a
# passage's score, f being its weighted count there, so never more than idf·(k1+1) however often it occurs.
BM25_K1 = 1.2


def bm25_idf(documents: int, matching: int) -> float:
    """FTS5's idf of a phrase matching `matching` of `documents` rows (clamped above zero, as FTS5 does)."""
    return max(1e-6, math.log((documents - matching + 0.5) / (matching + 0.5)))


@dataclass(frozen=True)
class RankSplit:
    """The ranked query's expression in tiers: `rare` (the rarer terms, OR-joined), then each of the `frequent`
    terms alone, least frequent first (which is also the order of the full expression), with `bounds[i]`: more than
    any passage can score from the phrases of `frequent[i:]` alone.

    bm25 is a sum over the expression's phrases, each phrase's part depending only on that phrase and the passage.
    So the passages whose rarest matching tier is a given one are ranked exactly by two statements that score only
    them, `(tier) NOT (rarer tiers) NOT (later tiers)` and `(tier) NOT (rarer tiers) AND (later tiers)`: the
    phrases they hold come in the full expression's order (the rarer tiers' phrases, listed in between, are in none
    of those passages), so their sums are the same, bit for bit. Tier by tier, rarest first: once the `limit`-th
    memory found scores more than the bound of the tiers left, no passage of theirs can enter the list, and their
    thousands of matches are never scored. A passage matching only the most frequent terms is worth little to
    bm25, so the list usually fills before their tier."""

    rare: str
    frequent: tuple[str, ...]
    bounds: tuple[float, ...]

    @property
    def expression(self) -> str:
        return " OR ".join((self.rare, *self.frequent))

    def steps(self) -> list[tuple[list[str], float | None]]:
        """Tier by tier, rarest first: the MATCH expressions ranking the passages whose rarest matching tier it is,
        and the bound of the tiers after it (None for the last)."""
        tiers = [self.rare, *self.frequent]
        steps: list[tuple[list[str], float | None]] = []
        for index, tier in enumerate(tiers):
            rarer, later = " OR ".join(tiers[:index]), " OR ".join(tiers[index + 1:])
            own = f"({tier})" if not rarer else f"(({tier}) NOT ({rarer}))"
            matches = [f"{own} NOT ({later})", f"{own} AND ({later})"] if later else [own]
            steps.append((matches, self.bounds[index] if later else None))
        return steps


def _recall(cursor, table: str, weights: tuple[float, ...], expression: str, root_keys: list[str],
            include_system: bool, limit: int, owners: Owners | None = None,
            have_rows: set[int] | frozenset[int] = frozenset(), split: RankSplit | None = None,
            stubs: bool = False, rows: RowCache | None = None, scoped: bool = False) -> list[tuple]:
    score = f"bm25({table}, {', '.join(str(w) for w in weights)})"
    roots = ", ".join("%s" for _ in root_keys)
    system = "" if include_system else " AND e.is_system = 0"
    fetch = limit * OVERFETCH
    # rowid breaks ties, so the parts of a split ranking merge into exactly the order of the whole.
    ranked_sql = f"SELECT rowid, {score} AS score FROM {table} WHERE {table} MATCH %s ORDER BY score, rowid LIMIT %s"

    def rank(match: str) -> list[tuple[int, float]]:
        return _rows(cursor, ranked_sql, [match, fetch])

    def best(hits: list[tuple[int, float]]) -> list[tuple[int, int, float]]:
        if not hits:
            return []
        # Which hits are visible, and whose: two integers a hit, from the process's map of chunk owners when
        # given, else from the database. Whole rows (text, timestamps) are read only for the best passage of each
        # of the first `limit` memories, not for every over-fetched hit.
        if owners is not None:
            entry_of = owners.visible(cursor, [rowid for rowid, _score in hits], include_system=include_system)
        else:
            cursor.execute(_VISIBLE_SQL.format(roots=roots, system=system),
                           [json.dumps([rowid for rowid, _score in hits]), *root_keys])
            entry_of = dict(cursor.fetchall())
        return _best_per_entry(((rowid, entry_of[rowid], value) for rowid, value in hits if rowid in entry_of), limit)

    def within_roots(match: str) -> list[tuple[int, int, float]]:
        cursor.execute(
            f"SELECT c.id, c.entry_id, {score} AS score FROM {table} f JOIN memory_chunks c ON c.id = f.rowid "
            f"JOIN memory_catalog_entries e ON e.id = c.entry_id "
            f"WHERE {table} MATCH %s AND e.root_key IN ({roots}){system} ORDER BY score, c.id LIMIT %s",
            [match, *root_keys, fetch],
        )
        return _best_per_entry(cursor.fetchall(), limit)

    if scoped:
        ranked = within_roots(split.expression if split is not None else expression)
    elif split is None:
        hits = rank(expression)
        ranked = best(hits)
    else:
        expression = split.expression
        hits = []
        for matches, bound in split.steps():
            for match in matches:
                hits = _merge(hits, rank(match), fetch)
            ranked = best(hits)
            if bound is None or (len(ranked) == limit and -ranked[-1][2] > bound):
                break
    if not scoped and len(ranked) < limit and len(hits) == fetch:
        # Other roots' memories filled the over-fetched hits: rank within the visible roots directly.
        ranked = within_roots(expression)
    if not ranked:
        return []
    if stubs:
        return [_stub_row(chunk, entry, value) for chunk, entry, value in ranked]
    return _with_rows(cursor, ranked, have_rows, rows)


class RowCache:
    """Whole rows by chunk id, without the recall signal (which every recall may change), for one database and
    memory generation: the caller keeps one per generation, since the rest of a row changes only with a write,
    which advances it (and chunk ids are never reused). The signals of the rows served from here are read fresh,
    in one statement. Also the ranking columns of chunks ranked but not read whole (chunk_ranking_rows).
    Bounded: past `limit` rows of either kind it starts that kind again."""

    def __init__(self, limit: int = 20_000) -> None:
        self.rows: dict[int, tuple] = {}
        self.ranking: dict[int, tuple] = {}  # RANKING_COLUMNS but the signal, of chunks not read whole
        self.limit = limit


_SIGNALS_SQL = ("SELECT s.root_key, s.filename, s.recall_score FROM json_each(%s) j "
                "CROSS JOIN memory_recall_signals s "
                "ON s.root_key = json_extract(j.value, '$[0]') AND s.filename = json_extract(j.value, '$[1]')")


def recall_signals(cursor, keys: list[tuple[str, str]]) -> dict[tuple[str, str], float]:  # noqa: ANN001
    """The recall EMA of each (root key, filename) that has one; one index seek each."""
    if not keys:
        return {}
    return {(root_key, filename): score
            for root_key, filename, score in _rows(cursor, _SIGNALS_SQL, [json.dumps(keys)])}


def _rows_by_chunk(cursor, chunk_ids: list[int], cache: RowCache | None) -> dict[int, tuple]:  # noqa: ANN001
    """Rows of _ROW_COLUMNS for these chunks (none for a chunk that is gone), from `cache` where it has them: the
    same values as _CHUNK_ROWS_SQL gives, the signal read with them."""
    known: dict[int, tuple] = {}
    if cache is not None:
        known = {chunk: row for chunk in chunk_ids if (row := cache.rows.get(chunk)) is not None}
    wanted = [chunk for chunk in chunk_ids if chunk not in known]
    by_chunk: dict[int, tuple] = {}
    if wanted:
        by_chunk = {row[0]: row for row in _rows(cursor, _CHUNK_ROWS_SQL, [json.dumps(wanted)])}
        if cache is not None:
            if len(cache.rows) + len(by_chunk) > cache.limit:
                cache.rows.clear()
            cache.rows.update((chunk, row[:-1]) for chunk, row in by_chunk.items())
    if known:
        # _ROW_COLUMNS: root_key is column 2, filename 7, the signal last.
        signals = recall_signals(cursor, sorted({(row[2], row[7]) for row in known.values()}))
        by_chunk.update((chunk, (*row, signals.get((row[2], row[7])))) for chunk, row in known.items())
    return by_chunk


def _with_rows(cursor, ranked: list[tuple[int, int, float]],  # noqa: ANN001
               have_rows: set[int] | frozenset[int], cache: RowCache | None = None) -> list[tuple]:
    """Ranked hits (chunk id, entry id, score) as rows of RECALL_COLUMNS: stubs for the entries in `have_rows`,
    whole rows read for the others (from `cache` where it has them); a hit whose row is gone (deleted since it
    was ranked) leaves the list."""
    by_chunk = _rows_by_chunk(cursor, [chunk for chunk, entry, _value in ranked if entry not in have_rows], cache)
    return [_stub_row(chunk, entry, value) if entry in have_rows else _recall_row(by_chunk[chunk], value)
            for chunk, entry, value in ranked if entry in have_rows or chunk in by_chunk]


def rows_for_stubs(cursor, stubs: list[tuple], *, have_rows: set[int] | frozenset[int],  # noqa: ANN001
                   rows: RowCache | None = None) -> list[tuple]:
    """A ranking fetched as stubs (`stubs=True`) with whole rows for the entries not in `have_rows`: the same rows,
    in the same order, as the ranking fetched with `have_rows` in the first place (the row read is its own
    statement either way)."""
    return _with_rows(cursor, [(row[-2], row[0], row[1]) for row in stubs], have_rows, rows)


def _merge(first: list[tuple[int, float]], second: list[tuple[int, float]], fetch: int) -> list[tuple[int, float]]:
    """Two ranked hit lists of disjoint passages as one, in the ranked statement's order, cut at `fetch`."""
    return sorted(first + second, key=lambda hit: (hit[1], hit[0]))[:fetch]


def _stub_row(chunk: int, entry: int, score: float) -> tuple:
    """A row of RECALL_COLUMNS holding only the entry id, the score and the chunk id: for a memory whose whole row
    the caller already has (found by the other list), so it is not read twice."""
    row: list[object] = [None] * len(RECALL_COLUMNS)
    row[0], row[1], row[-2] = entry, score, chunk
    return tuple(row)


def _best_per_entry(hits, limit: int) -> list[tuple[int, int, float]]:  # noqa: ANN001
    """Chunk hits (chunk id, entry id, score; best first) to entry hits (the same, each memory once, by its best
    passage)."""
    seen: set[int] = set()
    ranked = []
    for chunk, entry, value in hits:
        if entry not in seen:
            seen.add(entry)
            ranked.append((chunk, entry, value))
            if len(ranked) == limit:
                break
    return ranked


def _recall_row(row: tuple, score: float) -> tuple:
    """A row of `_ROW_COLUMNS` in RECALL_COLUMNS order: entry_id, the score, an empty snippet, then the catalog
    columns and the chunk id. Snippets are cut by the caller from the passage: FTS5's snippet() over a rowid list
    would re-run the whole match."""
    return (row[1], score, "", *row[2:])


def _successor_sql(window: int, include_system: bool) -> str:
    system = "" if include_system else " AND n.is_system = 0"
    following = ", ".join(
        "(SELECT n.id FROM memory_catalog_entries n WHERE n.root_key = a.root_key "
        "AND n.origin_session = a.origin_session AND (n.created_at, n.filename) > (a.created_at, a.filename)"
        f"{system} ORDER BY n.created_at, n.filename LIMIT 1 OFFSET {distance})"
        for distance in range(window)
    )
    # The ids travel as one JSON parameter, so the statement's text is the same for every query and stays prepared.
    return (f"SELECT a.id, {following} FROM memory_catalog_entries a "
            f"WHERE a.id IN (SELECT value FROM json_each(%s)) AND a.origin_session != ''")


# The same rows looked up by entry id (entries first, each joined to its first chunk).
_ENTRY_ROWS_SQL = (_ROW_COLUMNS + "FROM memory_catalog_entries e CROSS JOIN memory_chunks c ON c.entry_id = e.id "
                   "WHERE e.id IN (SELECT value FROM json_each(%s)) AND c.ordinal = 0")
# Rows by chunk id: the lexical lists' chosen passages and the semantic list's hits. CROSS JOIN fixes the loop
# order: chunks by rowid first. Left to itself, SQLite walks the root's whole index.
_CHUNK_ROWS_SQL = (_ROW_COLUMNS + "FROM memory_chunks c CROSS JOIN memory_catalog_entries e ON e.id = c.entry_id "
                   "WHERE c.id IN (SELECT value FROM json_each(%s))")
# What a semantic-only candidate is ranked by (its score's recency and signal, the sort's filename and root): its
# whole row, passage included, is read only if it places.
_CHUNK_RANKING_SQL = ("SELECT c.id, e.id, e.root_key, e.filename, e.updated_at, "
                      "(SELECT s.recall_score FROM memory_recall_signals s "
                      "WHERE s.root_key = e.root_key AND s.filename = e.filename) "
                      "FROM memory_chunks c CROSS JOIN memory_catalog_entries e ON e.id = c.entry_id "
                      "WHERE c.id IN (SELECT value FROM json_each(%s))")
RANKING_COLUMNS = ("chunk_id", "entry_id", "root_key", "filename", "updated_at", "recall_signal")
_ENTRY_HEADERS_SQL = ("SELECT e.id, e.filename, e.name, e.description FROM memory_catalog_entries e "
                      "WHERE e.id IN (SELECT value FROM json_each(%s))")


def session_successors(cursor, anchor_ids: list[int], *, window: int,  # noqa: ANN001
                       include_system: bool) -> list[tuple[int, int, int]]:
    """For each anchor entry, the next `window` memories recorded after it in its root and origin session (by
    creation time, then filename), as (anchor entry id, distance from 1, entry id). One index seek each; anchors
    without a session have none."""
    if not anchor_ids or window < 1:
        return []
    return [(anchor, distance, entry)
            for anchor, *following in _rows(cursor, _successor_sql(window, include_system), [json.dumps(anchor_ids)])
            for distance, entry in enumerate(following, 1) if entry is not None]


def entry_headers(cursor, entry_ids: list[int]) -> dict[int, tuple[str, str, str]]:  # noqa: ANN001
    """(filename, name, description) of each entry: enough to weigh a memory before reading all of it."""
    if not entry_ids:
        return {}
    return {entry: (filename, name, description)
            for entry, filename, name, description in _rows(cursor, _ENTRY_HEADERS_SQL, [json.dumps(entry_ids)])}


def entry_rows(cursor, entry_ids: list[int]) -> list[tuple]:  # noqa: ANN001
    """Rows of RECALL_COLUMNS (no score) for these entries, in no particular order."""
    if not entry_ids:
        return []
    return [_recall_row(row, 0.0) for row in _rows(cursor, _ENTRY_ROWS_SQL, [json.dumps(entry_ids)])]


def chunk_rows(cursor, chunk_ids: list[int], *, rows: RowCache | None = None) -> list[tuple]:  # noqa: ANN001
    """Rows of RECALL_COLUMNS (no score) for these chunks, in no particular order (from `rows` where it has
    them)."""
    if not chunk_ids:
        return []
    return [_recall_row(row, 0.0) for row in _rows_by_chunk(cursor, chunk_ids, rows).values()]


def chunk_ranking_rows(cursor, chunk_ids: list[int], *, rows: RowCache | None = None) -> list[tuple]:  # noqa: ANN001
    """Rows of RANKING_COLUMNS for these chunks, in no particular order: the same values as chunk_rows gives for
    those columns (from `rows`, its whole rows or its ranking rows, where it has them; signals read fresh)."""
    if not chunk_ids:
        return []
    known: dict[int, tuple] = {}
    if rows is not None:
        for chunk in chunk_ids:
            if (found := rows.ranking.get(chunk)) is not None:
                known[chunk] = found
            elif (whole := rows.rows.get(chunk)) is not None:
                # _ROW_COLUMNS: chunk id, entry id, root_key, ..., filename (7), ..., updated_at (13).
                known[chunk] = (whole[0], whole[1], whole[2], whole[7], whole[13])
    wanted = [chunk for chunk in chunk_ids if chunk not in known]
    found_rows: list[tuple] = []
    if wanted:
        found_rows = _rows(cursor, _CHUNK_RANKING_SQL, [json.dumps(wanted)])
        if rows is not None:
            if len(rows.ranking) + len(found_rows) > rows.limit:
                rows.ranking.clear()
            rows.ranking.update((row[0], row[:-1]) for row in found_rows)
    if known:
        signals = recall_signals(cursor, sorted({(row[2], row[3]) for row in known.values()}))
        found_rows.extend((*row, signals.get((row[2], row[3]))) for row in known.values())
    return found_rows


def recall_unicode(cursor, *, expression: str, root_keys: list[str], include_system: bool, limit: int,  # noqa: ANN001
                   owners: Owners | None = None, split: RankSplit | None = None,
                   rows: RowCache | None = None, scoped: bool = False) -> list[tuple]:
    """Rows of RECALL_COLUMNS, best bm25 first, from the word index; with `split`, ranked in parts (the same rows,
    see RankSplit), and `expression` is unused. Whole rows from `rows` where it has them. `scoped`: ranked within
    the roots at once (see OVERFETCH); the same rows."""
    return _recall(cursor, UNICODE_TABLE, UNICODE_WEIGHTS, expression, root_keys, include_system, limit, owners,
                   split=split, rows=rows, scoped=scoped)


def recall_trigram(cursor, *, expression: str, root_keys: list[str], include_system: bool, limit: int,  # noqa: ANN001
                   owners: Owners | None = None, have_rows: set[int] | frozenset[int] = frozenset(),
                   stubs: bool = False, scoped: bool = False) -> list[tuple]:
    """Rows of RECALL_COLUMNS, best bm25 first, from the trigram index: partial words and typos. Memories in
    `have_rows` (entry ids), and every memory with `stubs`, come as stubs: entry id, score and chunk id only.
    `scoped`: ranked within the roots at once (see OVERFETCH); the same rows."""
    return _recall(cursor, TRIGRAM_TABLE, TRIGRAM_WEIGHTS, expression, root_keys, include_system, limit, owners,
                   have_rows, stubs=stubs, scoped=scoped)
