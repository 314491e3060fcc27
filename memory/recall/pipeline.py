"""The recall pipeline: three candidate lists (the word index, the trigram index, the chunk vectors) and a fourth
that ranks their candidates again by their passages' tokens (token_match), a fusion that weighs each list by how
decisive it is for this question, scope shadowing, top-K.

score = Σ w'_list·(½·value_list + ½·k/(k+rank_list)) + w_recency·0.5^(age/half_life) + w_signal·EMA
value_list is the candidate's match in the list's own measure relative to its best (1 for the best); rank_list from 0,
so a list's first entry scores its full weight; a list the entry is absent from contributes 0 (the semantic list: its
last entry's value, an upper bound). w'_list is the configured weight scaled by the square root of the list's
decisiveness for this question (`decisiveness`, `list_weights`), the four rescaled to the configured weights'
sum. Weights, k and sizes come from configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection

from compozy.config import Config, RecallConfig, RecallContext
from memory.catalog import fts, owners, sql, vectors
from memory.catalog.fts import RecallRow, quote_term
from memory.domain.models import SCOPE_DEPTH, ScopeRef, utc_now
from memory.providers.embeddings import EmbedderError, LocalEmbedder

from . import side_thread
from .query import RecallQuery, stem
from .token_match import TokenMatch, neighbour_table, token_match

# Re-ranking of the word index's candidates. bm25 over OR-joined terms already prefers memories sharing more of
# the query's words; these factors add what it cannot see: how many of the query's words a memory covers at all
# (a long memory repeating one word is not a better answer), and whether they are in its name or description.
COVERAGE_BOOST = 0.5
HEADER_BOOST = 2.0


@dataclass(eq=False)
class RecallCandidate:
    """One catalog entry on its way through recall: its row, its ranks in the candidate lists, and its score in
    parts. Not the controller's write candidate (memory.domain.models.Candidate)."""

    row: RecallRow
    snippet: str = ""
    unicode_rank: int | None = None
    trigram_rank: int | None = None
    semantic_rank: int | None = None
    token_rank: int | None = None
    # Its match in each list's own measure, relative to that list's best match (fusion's `value`).
    values: dict[str, float] = field(default_factory=dict)
    parts: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    strength: float = 0.0  # the strongest of its lists' matches, relative to each list's best (RELATIVE_CUT)
    shadowed_by: dict[str, Any] | None = None

    @property
    def root_key(self) -> str:
        return self.row.root_key

    @property
    def filename(self) -> str:
        return self.row.filename

    @property
    def scope(self) -> str:
        return self.row.scope

    @property
    def agent_name(self) -> str:
        return self.row.agent_name

    @property
    def agent_tier(self) -> str:
        return self.row.agent_tier

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def description(self) -> str:
        return self.row.description

    @property
    def body(self) -> str:
        return self.row.body

    @property
    def updated_at(self) -> datetime:
        return self.row.updated_at

    @property
    def key(self) -> str:
        return f"{self.row.type}::{self.row.slug}"

    @property
    def depth(self) -> int:
        scope = self.row.scope
        return SCOPE_DEPTH[f"agent:{self.row.agent_tier}" if scope == "agent" else scope]

    def identity(self) -> dict[str, Any]:
        return {"scope": self.row.scope, "agent_name": self.row.agent_name or None,
                "agent_tier": self.row.agent_tier or None, "workspace_id": self.row.workspace_id or None,
                "filename": self.row.filename}


@dataclass
class Recall:
    query: RecallQuery
    winners: list[RecallCandidate]
    shadowed: list[RecallCandidate]
    warning: str | None = None


def _find(lowered: str, needle: str, whole: bool) -> int:
    """Where `needle` first occurs in `lowered` not inside a longer word: no letter or digit just before it (an
    underscore or punctuation is fine) and, when `whole`, none just after it; -1 when nowhere. The same matches as
    the regex `(?<![^\\W_])needle` (with `(?![^\\W_])` when whole), found by str.find, which skips to each
    occurrence, where the regex engine tried every position of a long passage."""
    at = lowered.find(needle)
    end = len(needle)
    while at >= 0:
        if (at == 0 or not lowered[at - 1].isalnum()) and (
                not whole or at + end == len(lowered) or not lowered[at + end].isalnum()):
            return at
        at = lowered.find(needle, at + 1)
    return -1


@dataclass(frozen=True)
class TermPattern:
    """The query's terms as found in a text: longer terms by the prefix their light stem gives (close to the word
    index's porter stemming: "configured" finds "configuration"), shorter ones whole (`whole`)."""

    needles: tuple[str, ...]
    whole: tuple[bool, ...]

    def first(self, lowered: str) -> int | None:
        """Where the first query term of a lowercased text starts."""
        starts = [at for needle, whole in zip(self.needles, self.whole, strict=True)
                  if (at := _find(lowered, needle, whole)) >= 0]
        return min(starts) if starts else None


def term_pattern(query: RecallQuery) -> TermPattern:
    needles, whole = [], []
    for term in query.terms:
        prefix = len(term) >= 4 and term.isalnum()
        needles.append(stem(term) if prefix else term)
        whole.append(not prefix)
    return TermPattern(tuple(needles), tuple(whole))


SNIPPET_CHARS = 160


def snippet(pattern: TermPattern, text: str, fragments: list[str] = ()) -> str:  # type: ignore[assignment]
    """A window of the passage around the first query term (or fragment) it contains, with ellipses where cut."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = pattern.first(lowered)
    start = found if found is not None else min((i for i in (lowered.find(f) for f in fragments) if i >= 0),
                                                default=0)
    begin = max(0, start - SNIPPET_CHARS // 3)
    if begin:
        space = flat.find(" ", begin)
        begin = space + 1 if 0 <= space < start else begin
    end = min(len(flat), begin + SNIPPET_CHARS)
    if end < len(flat):
        space = flat.rfind(" ", begin, end)
        end = space if space > start else end
    return ("…" if begin else "") + flat[begin:end] + ("…" if end < len(flat) else "")


def terms_in(pattern: TermPattern, text: str) -> set[int]:
    """The (1-based) positions of the query terms the text holds."""
    lowered = text.lower()
    # `in` first: most terms are in none of a question's ~180 headers and passages, and it answers those without a
    # Python call (_find finds nothing where `in` does not).
    return {index for index, (needle, whole) in enumerate(zip(pattern.needles, pattern.whole, strict=True), 1)
            if needle in lowered and _find(lowered, needle, whole) >= 0}


@dataclass(frozen=True)
class WordMatch:
    """A word-index candidate's value, in two factors: how well its text matches (bm25 scaled by the share of query
    terms it covers) and how much its name and description do."""

    content: float
    header: float
    row: RecallRow

    @property
    def value(self) -> float:
        return self.content * self.header


def _header_terms(pattern: TermPattern, name: str, description: str) -> set[int]:
    return terms_in(pattern, f"{name} {description}")


def _header_factor(in_header: set[int]) -> float:
    return 1 + HEADER_BOOST * len(in_header)


def rerank(query: RecallQuery, rows: list[RecallRow], pattern: TermPattern) -> list[WordMatch]:
    """The word index's candidates, best first: bm25 scaled by the share of query terms the passage and header
    cover, and by header matches."""
    matches = []
    for row in rows:
        in_header = _header_terms(pattern, row.name, row.description)
        covered = in_header | terms_in(pattern, row.passage)
        content = -row.bm25 * (1 + COVERAGE_BOOST * len(covered) / max(1, len(query.terms)))
        matches.append(WordMatch(content, _header_factor(in_header), row))
    matches.sort(key=lambda match: (-match.value, match.row.filename))
    return matches


def with_session_context(cursor, matches: list[WordMatch], pattern: TermPattern, *,  # noqa: ANN001
                         context: RecallContext, include_system: bool, limit: int,
                         generation: int) -> list[RecallRow]:
    """The word index's ranking with session context: each of the `window` memories recorded after a candidate in
    the same session gains `decay`^distance of the candidate's content match, scaled by its own header factor
    (relative to the best value).

    A memory often answers what the one recorded just before it asked or started (in a conversation, the reply to
    a question; in a work session, the outcome of a step) without repeating its words, while its name and
    description (who said it, when) are its own. Gains add up, so a memory that follows several matches rises; a
    memory recorded outside any session has no context."""
    if not matches:
        return []
    best = matches[0].value
    if context.window == 0 or context.decay == 0 or best <= 0:
        for match in matches[:limit]:
            match.row.strength = match.value / best if best > 0 else 0.0
        return [match.row for match in matches[:limit]]
    rows = {match.row.entry_id: match.row for match in matches}
    combined = {match.row.entry_id: match.value / best for match in matches}
    content = {match.row.entry_id: match.content / best for match in matches}
    headers = {match.row.entry_id: match.header for match in matches}
    anchors = [match.row.entry_id for match in matches if match.row.origin_session]
    followers = _session_successors(cursor, anchors, window=context.window, include_system=include_system,
                                    generation=generation)
    new = _entry_headers(cursor, sorted({entry for _anchor, _distance, entry in followers} - rows.keys()),
                         generation)
    names = {entry: row.filename for entry, row in rows.items()}
    for entry, (filename, name, description) in new.items():
        headers[entry] = _header_factor(_header_terms(pattern, name, description))
        names[entry] = filename
    for anchor, distance, entry in followers:
        if entry in headers:
            combined[entry] = combined.get(entry, 0.0) + context.decay ** distance * content[anchor] * headers[entry]
    order = sorted(combined, key=lambda entry: (-combined[entry], names[entry]))[:limit]
    # Only the followers that made the list are read whole.
    for values in fts.entry_rows(cursor, [entry for entry in order if entry not in rows]):
        rows[values[0]] = RecallRow(*values)
    for entry in order:
        if entry in rows:
            rows[entry].strength = combined[entry]
    return [rows[entry] for entry in order if entry in rows]


def _deepest_holders(candidates: list[RecallCandidate], root_keys: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
    """For each candidate's type::slug (its filename, for curated memories), the deepest visible entry holding it,
    matched by the query or not."""
    if len(root_keys) < 2 or not candidates:
        return {}
    names = sorted({c.row.filename for c in candidates})
    with sql.cursor() as cursor:
        cursor.execute(
            f"SELECT scope, agent_name, agent_tier, workspace_id, filename, type, slug FROM memory_catalog_entries "
            f"WHERE root_key IN ({', '.join('%s' for _ in root_keys)}) AND is_system = 0 "
            f"AND filename IN ({', '.join('%s' for _ in names)})",
            [*root_keys, *names],
        )
        deepest: dict[str, tuple[int, dict[str, Any]]] = {}
        for scope, agent, tier, workspace, filename, memory_type, slug in cursor.fetchall():
            depth = SCOPE_DEPTH[f"agent:{tier}" if scope == "agent" else scope]
            key = f"{memory_type}::{slug}"
            if key not in deepest or depth > deepest[key][0]:
                deepest[key] = (depth, {"scope": scope, "agent_name": agent or None, "agent_tier": tier or None,
                                        "workspace_id": workspace or None, "filename": filename})
    return deepest


# A term in at least this share of all memories is common: bm25 gives it almost no weight, yet it would make nearly
# every memory a match to score. Below RARE_SHARE a term is rare enough to search as a substring too.
COMMON_SHARE = 0.5
RARE_SHARE = 0.01
@dataclass
class CatalogStatistics:
    """Per database and memory generation: the number of passages; each term's document frequency in the word index
    (any inflection), counted up to the common cut; each 4-gram's frequency in the trigram index,
    counted up to the common cut. They change only when memories change, which advances the generation;
    questions share most of their words, so most are answered from here."""

    documents: int
    terms: dict[str, int] = field(default_factory=dict)
    grams: dict[str, int] = field(default_factory=dict)

    @property
    def common_at(self) -> int:
        return max(20, int(self.documents * COMMON_SHARE))


_statistics: dict[tuple[str, int], CatalogStatistics] = {}
_STATISTICS_MAX = 50_000  # a bound on memory; past it the terms are counted again


def _catalog_statistics(cursor, generation: int) -> CatalogStatistics:  # noqa: ANN001
    key = (str(connection.settings_dict["NAME"]), generation)
    found = _statistics.get(key)
    if found is None or len(found.terms) + len(found.grams) > _STATISTICS_MAX:
        _statistics.clear()
        found = _statistics[key] = CatalogStatistics(fts.document_count(cursor))
    return found


@dataclass
class GenerationFacts:
    """Per database and memory generation, what recall reads of the catalog that changes only with the generation:
    each anchor's session successors (by window and whether system files count), the headers of entries weighed
    as followers, and whole rows of candidates (their recall signals are read fresh, fts.RowCache). A question's
    anchors and candidates are mostly those of earlier questions on the same subject (and, in a conversation's
    few hundred memories, of most questions)."""

    successors: dict[tuple[int, bool], dict[int, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    headers: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    rows: fts.RowCache = field(default_factory=fts.RowCache)

    @property
    def size(self) -> int:
        return len(self.headers) + sum(len(known) for known in self.successors.values())


_session_facts: dict[tuple[str, int], GenerationFacts] = {}


def _facts(generation: int) -> GenerationFacts:
    key = (str(connection.settings_dict["NAME"]), generation)
    found = _session_facts.get(key)
    if found is None or found.size > _STATISTICS_MAX:
        _session_facts.clear()
        found = _session_facts[key] = GenerationFacts()
    return found


def _session_successors(cursor, anchors: list[int], *, window: int, include_system: bool,  # noqa: ANN001
                        generation: int) -> list[tuple[int, int, int]]:
    """fts.session_successors, from the per-generation facts where known: (anchor, distance, entry) in the
    statement's order (anchors by id, then distance), so gains add up in the same order."""
    known = _facts(generation).successors.setdefault((window, include_system), {})
    missing = [anchor for anchor in anchors if anchor not in known]
    if missing:
        found: dict[int, list[tuple[int, int]]] = {anchor: [] for anchor in missing}
        for anchor, distance, entry in fts.session_successors(cursor, missing, window=window,
                                                              include_system=include_system):
            found[anchor].append((distance, entry))
        known.update((anchor, tuple(following)) for anchor, following in found.items())
    return [(anchor, distance, entry) for anchor in sorted(set(anchors)) for distance, entry in known[anchor]]


def _entry_headers(cursor, entry_ids: list[int], generation: int) -> dict[int, tuple[str, str, str]]:  # noqa: ANN001
    """fts.entry_headers, from the per-generation facts where known (an entry gone has no header, as before)."""
    known = _facts(generation).headers
    missing = [entry for entry in entry_ids if entry not in known]
    if missing:
        known.update(fts.entry_headers(cursor, missing))
    return {entry: known[entry] for entry in entry_ids if entry in known}


def forget_statistics() -> None:
    """Drop the cached statistics and session facts (tests: each test's rollback makes generation numbers
    repeat)."""
    _statistics.clear()
    _session_facts.clear()


def classify_terms(cursor, query: RecallQuery,  # noqa: ANN001
                   generation: int) -> tuple[set[str], set[str], set[str]]:
    """(common, rare, unfound) by document frequency, each count stopping as soon as the answer is known. Unfound
    terms are matched by no memory in any inflection: typos, words no memory holds, and words memories hold only
    inside longer ones ("postgres" in "postgresql")."""
    statistics = _catalog_statistics(cursor, generation)
    known, common_at = statistics.terms, statistics.common_at
    rare_below = max(20, int(statistics.documents * RARE_SHARE))
    new = [term for term in dict.fromkeys(query.terms) if term not in known]
    if new:
        counted = fts.match_counts(cursor, fts.UNICODE_TABLE, [query.unicode_form(term) for term in new], common_at)
        known.update(zip(new, counted, strict=True))
    common: set[str] = set()
    rare: set[str] = set()
    unfound: set[str] = set()
    for term in query.terms:
        frequency = known[term]
        if frequency >= common_at:
            common.add(term)
        elif frequency < rare_below:
            rare.add(term)
        if len(term) >= 3 and frequency == 0:
            unfound.add(term)
    return common, rare, unfound


def common_grams(cursor, query: RecallQuery, unfound: set[str], generation: int) -> set[str]:  # noqa: ANN001
    """The unfound terms' 4-grams found in at least COMMON_SHARE of all passages (and in at least 20): like a common
    word, such a gram ("tion", "ment") has almost no bm25 weight, yet it makes most memories a match and costs the
    trigram query most of its time."""
    grams = query.unseen_grams(unfound)
    if not grams:
        return set()
    statistics = _catalog_statistics(cursor, generation)
    known, common_at = statistics.grams, statistics.common_at
    new = [gram for gram in grams if gram not in known]
    if new:
        known.update(zip(new, fts.match_counts(cursor, fts.TRIGRAM_TABLE, [quote_term(gram) for gram in new],
                                                common_at), strict=True))
    return {gram for gram in grams if known[gram] >= common_at}


# A term in at least this share of all passages (and in at least FREQUENT_MIN of them), though not common, is
# frequent: it still counts in the ranking, but the word index scores its matches only when the rarer terms'
# matches cannot fill the list (fts.RankSplit, exact). Scoring is most of a ranked query's cost; in a catalog of
# 10,000 memories a question holding two words found in 10-50% of them spent 10-20 ms scoring their matches.
# Below a thousand matches scoring costs less than the split's extra statements (+0.4 ms a question on the chat
# dev set, whose conversations hold 370-680 memories).
FREQUENT_SHARE = 0.1
FREQUENT_MIN = 1000


def word_ranking(cursor, query: RecallQuery, common: set[str], generation: int,  # noqa: ANN001
                 limit: int) -> tuple[str, fts.RankSplit | None]:
    """The word index's expression and, when it holds both frequent and rarer terms, its split (fts.RankSplit):
    the rarer terms first, then the frequent ones from the least frequent, which is also the order of the
    expression (without a split, the question's order). Not split when the
    rarer terms match fewer than `limit` passages: they could not fill the list, so the frequent terms' passages
    would be ranked anyway."""
    statistics = _catalog_statistics(cursor, generation)
    frequent_at = max(FREQUENT_MIN, int(statistics.documents * FREQUENT_SHARE))
    kept = [term for term in query.terms if term not in common] or list(query.terms)
    # term -> its word-index form; two terms with one form count once (by the first), as in the expression.
    forms: dict[str, int] = {}
    for term in kept:
        forms.setdefault(query.unicode_form(term), statistics.terms[term])
    rare = [form for form, frequency in forms.items() if frequency < frequent_at]
    # Least frequent first (the question's order among equals): the tiers are ranked in this order, and the tiers
    # left after each have the smallest bound.
    frequent = sorted((form for form, frequency in forms.items() if frequency >= frequent_at), key=forms.__getitem__)
    if not frequent or sum(forms[form] for form in rare) < limit:
        return " OR ".join(forms) or '""', None
    ceilings = [(fts.BM25_K1 + 1) * fts.bm25_idf(statistics.documents, forms[form]) for form in frequent]
    # A margin for float rounding: a looser bound only means a tier is scored a little more often.
    bounds = tuple(sum(ceilings[index:]) * 1.01 for index in range(len(frequent)))
    split = fts.RankSplit(" OR ".join(rare), tuple(frequent), bounds)
    return split.expression, split


# A memory that neither lexical list found joins the ranking only when its best passage is at least as near the
# query as the median lexical candidate's passage: similarities of static embeddings are not comparable across
# corpora (long passages score lower than short ones against a question), so the same query's lexical finds are
# the yardstick. Without any lexical candidate nothing is added: a query sharing no word with any memory returns
# nothing rather than the least unrelated memories. (The nearest lexical candidate as the gate gave 0.3 points
# less R@5 on the curated-facts dev set and the same on chat turns.)


@dataclass(frozen=True)
class SemanticHit:
    entry_id: int
    similarity: float
    chunk_id: int
    gated: bool  # farther from the query than the median lexical candidate: ranks those, never joins them


@dataclass(frozen=True)
class SemanticScores:
    """The part of the semantic list that needs no lexical list: each root's similarity of every chunk to the query
    (before system files are masked, for the gate) and each memory's best passage among the nearest chunks."""

    roots: list[tuple[np.ndarray, np.ndarray]]  # (chunk ids, similarity) per root with vectors of this model
    best: dict[int, tuple[float, int]]  # entry id -> (similarity, chunk id) of its best passage
    limit: int
    # Of every chunk's similarity: what an unrelated memory scores, the semantic list's zero (0 below ZERO_SAMPLE
    # chunks).
    mean: float = 0.0


# A list's zero (what an unrelated memory scores) is read from the memories themselves: the semantic list's from every
# visible passage, the token-match list's from its candidates. Fewer than this many say little about what is
# unrelated: a workspace's lone memory was its own mean and median, so however well it matched, its meaning and
# token match counted for nothing (and read 0.0 in why_recalled). Below it the zero is the score's own (similarity
# 0, no token matched). Ten, as the place a list's decisiveness looks down to.
ZERO_SAMPLE = 10


def semantic_scores(query: RecallQuery, *, root_keys: list[str], include_system: bool, limit: int,
                    generation: int) -> SemanticScores | None:
    """The query's nearest memories in the embedding space, ungated; None without an embedder. Raises
    EmbedderError when the query cannot be embedded."""
    current = vectors.embedder()
    if current is None or limit < 1:
        return None
    query_vector = current.embed([query.text])[0]
    model = current.model_id
    best: dict[int, tuple[float, int]] = {}
    scored: list[tuple[np.ndarray, np.ndarray]] = []
    for root_key in root_keys:
        root = vectors.root_matrix(root_key, generation, model)
        if not len(root.chunk_ids) or root.matrix.shape[1] != query_vector.shape[0]:
            continue
        # einsum, not `@`: numpy hands `@` to OpenBLAS, whose matrix-vector product goes multi-threaded past a
        # few thousand rows; on a shared machine those threads wait for a core and then spin after the call,
        # so the product took 2-10 ms of wall time at 10,000 chunks, against ~0.6 ms on one core here.
        similarity = np.einsum("ij,j->i", root.matrix, query_vector)
        scored.append((root.chunk_ids, similarity))
        if not include_system:
            similarity = np.where(root.system, -np.inf, similarity)
        # Enough chunks to hold `limit` memories even when long memories place several passages near the top.
        take = min(len(similarity), limit * 4)
        top = np.argpartition(-similarity, take - 1)[:take]
        top = top[np.argsort(-similarity[top], kind="stable")]
        top = top[similarity[top] != -np.inf]
        # Each memory by its best passage: its first place in that order (np.unique keeps first occurrences).
        _entries, first = np.unique(root.entry_ids[top], return_index=True)
        picked = top[np.sort(first)]
        # As Python numbers in three conversions, not three numpy scalars a chunk (the same values: tolist gives
        # each float32 as the float that float() gives).
        for value, entry, chunk in zip(similarity[picked].tolist(), root.entry_ids[picked].tolist(),
                                       root.chunk_ids[picked].tolist(), strict=True):
            if entry not in best or value > best[entry][0]:
                best[entry] = (value, chunk)
    chunks = sum(len(similarity) for _ids, similarity in scored)
    mean = sum(float(similarity.sum()) for _ids, similarity in scored) / chunks if chunks >= ZERO_SAMPLE else 0.0
    return SemanticScores(scored, best, limit, mean)


def semantic_gate(scores: SemanticScores | None, lexical: set[int]) -> list[SemanticHit]:
    """The semantic list, best first (each memory by its best passage): `scores`' first `limit` memories, those
    farther from the query than the median of the passages the lexical lists found (`lexical`, chunk ids)
    marked as gated."""
    if scores is None:
        return []
    lexical_similarity: list[float] = []
    if lexical:
        wanted = np.fromiter(lexical, dtype=np.int64, count=len(lexical))
        for chunk_ids, similarity in scores.roots:
            where = np.searchsorted(chunk_ids, wanted)
            found = where[(where < len(chunk_ids))]
            found = found[chunk_ids[found] == wanted[where < len(chunk_ids)]]
            lexical_similarity.extend(similarity[found].tolist())
    best = scores.best
    order = sorted(best, key=lambda entry: (-best[entry][0], entry))[:scores.limit]
    gate = float(np.median(lexical_similarity)) if lexical_similarity else np.inf
    return [SemanticHit(entry, best[entry][0], best[entry][1], best[entry][0] < gate) for entry in order]


# The pipeline: a plan of the question, then five stages in the order they run (`recall` below reads them in one
# screen). Rows are RecallRow all the way; each stage takes what the last one returned.


@dataclass(frozen=True)
class RecallPlan:
    """What a question is looked up with: its terms weighed against the catalog, the expressions each lexical index
    is queried with, the owners of the visible roots' chunks, and the settings."""

    query: RecallQuery
    settings: RecallConfig
    root_keys: list[str]
    include_system: bool
    top_k: int
    generation: int
    pattern: TermPattern
    fragments: list[str]  # rare and unfound terms, longest first: where a snippet starts when no term is found whole
    visible: owners.Owners
    expression: str
    split: fts.RankSplit | None
    trigram_expression: str | None
    # The visible roots hold fewer memories than a list's pool: the lexical lists rank within them at once (see
    # fts.OVERFETCH).
    scoped: bool = False

    @property
    def pool(self) -> int:
        return self.settings.raw_candidates


@dataclass
class Candidates:
    """The candidate lists' memories, each once, with its rank in each list that found it (by entry id, in the
    order the lists bring them), and the lists' sizes."""

    by_entry: dict[int, RecallCandidate]
    unicode_size: int
    trigram_size: int
    semantic_size: int
    holders: list[str]  # the visible roots holding memories: shadowing looks only there
    ranking_only: bool  # the trigram- and semantic-only candidates hold only what ranks them (fts.RANKING_COLUMNS)
    rows: fts.RowCache
    warning: str | None = None
    # Each list's decisiveness for this question (`decisiveness`), by list name.
    decisiveness: dict[str, float] = field(default_factory=dict)


def recall(query: RecallQuery, *, refs: list[ScopeRef], config: Config, top_k: int, include_system: bool,
           now: datetime | None = None) -> Recall:
    """Candidates from three lists, each candidate's score in parts, one ranking, shadowing, the answer."""
    plan = plan_recall(query, refs=refs, config=config, top_k=top_k, include_system=include_system)
    found = candidates(plan)
    scores(found, plan, now or utc_now())
    ranked = fusion(found, plan)
    winners, shadowed = shadowing(ranked, found, plan)
    return packaging(plan, winners, shadowed, found.warning)


def plan_recall(query: RecallQuery, *, refs: list[ScopeRef], config: Config, top_k: int,
                include_system: bool) -> RecallPlan:
    from memory.catalog.indexer import current_generation

    root_keys = [ref.root_key for ref in refs]
    settings = config.memory.recall
    generation = current_generation()
    with sql.cursor() as cursor:
        common, rare, unfound = classify_terms(cursor, query, generation)
        visible = owners.owners(cursor, root_keys, generation)
        expression, split = word_ranking(cursor, query, common, generation, settings.raw_candidates)
        trigram_expression = query.trigram_expression(rare, unfound, common_grams(cursor, query, unfound, generation))
    return RecallPlan(query, settings, root_keys, include_system, top_k, generation, term_pattern(query),
                      sorted(rare | unfound, key=len, reverse=True), visible, expression, split, trigram_expression,
                      scoped=visible.memories < settings.raw_candidates)


def candidates(plan: RecallPlan) -> Candidates:
    """Stage 1: the word index's list (re-ranked, with session context), the trigram list and the semantic list,
    merged by memory.

    The trigram ranking and the semantic similarities need nothing from the word index's ranking: they run in the
    side thread (when usable) while this thread ranks by the word index; the semantic gate, which needs the lexical
    lists' passages, is applied after both (side_thread explains why the answer is the same as running all of it
    here, which is what happens when the side thread is not usable)."""
    weights = plan.settings.weights
    side = side_thread.start(_side_lists, plan.query, trigram_expression=plan.trigram_expression,
                             root_keys=plan.root_keys, include_system=plan.include_system, pool=plan.pool,
                             visible=plan.visible, generation=plan.generation, semantic=weights.semantic > 0,
                             scoped=plan.scoped)
    rows = _facts(plan.generation).rows
    with sql.cursor() as cursor:
        unicode_list = _word_list(cursor, plan, rows)
        trigram_stubs, scores, embedder_error = side.result()
        # A memory is shadowed only by one in another root: with a single visible root holding memories at this
        # generation, nothing is, and only the first top_k of the ranking are looked at. Then the memories only the
        # trigram or the semantic list brings are read with what ranks them (fts.RANKING_COLUMNS), in one statement
        # after both lists, and whole rows only for the few that place (_read_placed): most of them never place,
        # and a whole row (passage, converted timestamps) costs far more than its ranking columns.
        holders = plan.visible.holding_memories()
        ranking_only = len(holders) < 2
        # The word index's memories are candidates with their rows already: the trigram list brings only its
        # ranks and best passages' ids for those (the candidate keeps the word index's row).
        unicode_ids = {row.entry_id for row in unicode_list}
        trigram_list = [RecallRow(*values) for values in (
            trigram_stubs if ranking_only
            else fts.rows_for_stubs(cursor, trigram_stubs, have_rows=unicode_ids, rows=rows))]
        # The trigram list's strengths, from its bm25 (negative: lower is better), before its rows are replaced.
        best_trigram = trigram_list[0].bm25 if trigram_list else None
        trigram_strength = ({row.entry_id: row.bm25 / best_trigram for row in trigram_list}
                            if best_trigram is not None and best_trigram < 0 else {})
        semantic: list[SemanticHit] = []
        semantic_rows: dict[int, RecallRow] = {}
        joining: set[int] = set()
        warning = None
        if embedder_error is not None:
            # Recall still answers, from the lexical lists, and says what it could not do.
            warning = f"semantic candidates unavailable, lexical recall only: {embedder_error}"
        elif weights.semantic > 0:
            lexical = {row.chunk_id for row in unicode_list + trigram_list if row.chunk_id}
            semantic = semantic_gate(scores, lexical)
            known = {row.entry_id for row in unicode_list + trigram_list}
            # Rows are read only for the memories this list alone brings in.
            joining = {hit.chunk_id for hit in semantic if not hit.gated and hit.entry_id not in known}
            if not ranking_only:
                semantic_rows = {values[0]: RecallRow(*values)
                                 for values in fts.chunk_rows(cursor, sorted(joining), rows=rows)}
        if ranking_only:
            chunks = {row.chunk_id for row in trigram_list if row.entry_id not in unicode_ids} | joining
            ranking = {values[0]: fts.ranking_row(values)
                       for values in fts.chunk_ranking_rows(cursor, sorted(chunks), rows=rows)}
            # A trigram hit whose memory went since it was ranked leaves the list, as a missing row does.
            trigram_list = [row if row.entry_id in unicode_ids else ranking[row.chunk_id]
                            for row in trigram_list if row.entry_id in unicode_ids or row.chunk_id in ranking]
            semantic_rows = {ranking[chunk].entry_id: ranking[chunk] for chunk in joining if chunk in ranking}
    by_entry: dict[int, RecallCandidate] = {}
    for rank, row in enumerate(unicode_list):
        by_entry[row.entry_id] = RecallCandidate(row=row, unicode_rank=rank)
        by_entry[row.entry_id].strength = row.strength
    for rank, row in enumerate(trigram_list):
        candidate = by_entry.setdefault(row.entry_id, RecallCandidate(row=row))
        candidate.trigram_rank = rank
        candidate.strength = max(candidate.strength, trigram_strength.get(row.entry_id, 0.0))
    for rank, found in enumerate(semantic):
        if found.entry_id in by_entry:
            by_entry[found.entry_id].semantic_rank = rank
        elif found.entry_id in semantic_rows:
            by_entry[found.entry_id] = RecallCandidate(row=semantic_rows[found.entry_id], semantic_rank=rank)
        if not found.gated and found.entry_id in by_entry:
            # At least as near the query as the median lexical candidate: the semantic list's own bar.
            by_entry[found.entry_id].strength = 1.0
    tokens = _token_list(plan, by_entry) if weights.token > 0 and embedder_error is None else None
    return Candidates(by_entry, len(unicode_list), len(trigram_list), len(semantic), holders, ranking_only, rows,
                      warning, fusion_inputs(by_entry, unicode_list, trigram_strength, semantic, scores, tokens))


def _token_embedder() -> LocalEmbedder | None:
    """The configured embedder when the token-match list can use it: the local one only, whose token vectors it
    reads."""
    current = vectors.embedder()
    return current if isinstance(current, LocalEmbedder) else None


def prepare_token_list() -> bool:
    """Build (or read) the token-match list's neighbour table now, so no question waits for it; False when the
    configured embedder has no token table. A server calls this at start-up."""
    current = _token_embedder()
    if current is None:
        return False
    neighbour_table(current)
    return True


def _token_list(plan: RecallPlan, by_entry: dict[int, RecallCandidate]) -> TokenMatch | None:
    """The token-match list over the other lists' candidates (memory/recall/token_match.py)."""
    current = _token_embedder()
    if current is None or not by_entry:
        return None
    roots = [vectors.root_matrix(root_key, plan.generation, current.model_id) for root_key in plan.root_keys]
    return token_match(current, plan.query.text, list(by_entry), roots)


def fusion_inputs(by_entry: dict[int, RecallCandidate], unicode_list: list[RecallRow],
                  trigram_strength: dict[int, float], semantic: list[SemanticHit],
                  scores: SemanticScores | None, tokens: TokenMatch | None = None) -> dict[str, float]:
    """What the fusion reads: sets each candidate's `values`, its value in each list (its match relative to the
    list's best: the word index's re-ranked value with session context, the trigram index's bm25, the semantic
    similarity above the corpus's mean, the token match above the candidates' median) and its token-match rank,
    and returns each list's decisiveness over all of its entries."""
    token_values: dict[int, float] = {}
    token_zero = 0.0
    if tokens is not None and tokens.scores:
        # The token list ranks only candidates, so its zero is their median: what a candidate that merely shares a
        # word or two with the question scores (when there are enough of them, ZERO_SAMPLE).
        if len(tokens.scores) >= ZERO_SAMPLE:
            token_zero = float(np.median(list(tokens.scores.values())))
        top = max(tokens.scores.values())
        span = top - token_zero
        ordered = sorted(tokens.scores, key=lambda entry: (-tokens.scores[entry], entry))
        for rank, entry in enumerate(ordered):
            by_entry[entry].token_rank = rank
            token_values[entry] = max(0.0, (tokens.scores[entry] - token_zero) / span) if span > 0 else 0.0
    semantic_values: dict[int, float] = {}
    semantic_tail = 0.0
    zero = scores.mean if scores is not None else 0.0
    if semantic and semantic[0].similarity > zero:
        span = semantic[0].similarity - zero
        semantic_values = {hit.entry_id: max(0.0, (hit.similarity - zero) / span) for hit in semantic}
        # A memory the list does not hold is at most as near as its last entry.
        semantic_tail = max(0.0, (semantic[-1].similarity - zero) / span)
    for candidate in by_entry.values():
        entry = candidate.row.entry_id
        candidate.values = {
            "unicode": candidate.row.strength if candidate.unicode_rank is not None else 0.0,
            "trigram": trigram_strength.get(entry, 0.0) if candidate.trigram_rank is not None else 0.0,
            "semantic": semantic_values.get(entry, semantic_tail),
            "token": token_values.get(entry, 0.0),
        }
    return {
        "unicode": decisiveness([row.strength for row in unicode_list], zero=0.0),
        "trigram": decisiveness(list(trigram_strength.values()), zero=0.0),
        "semantic": decisiveness([hit.similarity for hit in semantic], zero=zero),
        "token": decisiveness(list(tokens.scores.values()), zero=token_zero) if tokens is not None else 0.0,
    }


# How decisive a list is for a question: how far its best match stands above its DECISIVE_AT-th, as a share of how
# far the best stands above the list's zero (what no match scores: 0 for bm25, the corpus's mean similarity for the
# semantic list). A list whose first ten are nearly equal cannot tell the answer from its neighbours, whatever its
# score scale; one whose best stands alone can. Over the four dev sets the measure told a list's hits from its misses
# (a hit in its first five) at an AUC of 0.65-0.89, for the word index and the semantic list alike.
DECISIVE_AT = 10


def decisiveness(values: list[float], *, zero: float) -> float:
    """(best − the DECISIVE_AT-th best) / (best − zero), in [0, 1]; with fewer values, the last stands for the
    DECISIVE_AT-th, and a list of one is decisive (1); an empty list, or one whose best is at its zero, is not (0)."""
    if not values:
        return 0.0
    ordered = sorted(values, reverse=True)
    best = ordered[0]
    if best <= zero:
        return 0.0
    tail = ordered[min(DECISIVE_AT, len(ordered)) - 1] if len(ordered) > 1 else zero
    return max(0.0, min(1.0, (best - tail) / (best - zero)))


def scores(found: Candidates, plan: RecallPlan, now: datetime) -> None:
    """Stage 2: each candidate's score in parts (`parts`): each list's part (its weight for this question, from
    `list_weights`, times half the candidate's value and half its reciprocal rank), recency and the recall
    signal."""
    settings = plan.settings
    weights = settings.weights
    k = settings.rank_constant
    # Hoisted out of the loop, which runs for every candidate of all three lists.
    w_recency, w_signal, half_life = weights.recency, weights.signal, settings.recency_half_life_days
    naive_now = now.replace(tzinfo=None) if now.tzinfo is not None else now
    lists = list_weights({"unicode": weights.unicode, "trigram": weights.trigram, "semantic": weights.semantic,
                          "token": weights.token}, found.decisiveness)
    for candidate in found.by_entry.values():
        row = candidate.row
        updated = row.updated_at
        # The same age as (now - updated) with updated given now's zone, without building an aware datetime.
        age = (naive_now - updated) if updated.tzinfo is None else (now - updated)
        age_days = max(0.0, age.total_seconds() / 86_400)
        values = candidate.values
        candidate.parts = {
            "unicode": _list_part(lists["unicode"], values.get("unicode", 0.0), candidate.unicode_rank, k),
            "trigram": _list_part(lists["trigram"], values.get("trigram", 0.0), candidate.trigram_rank, k),
            "semantic": _list_part(lists["semantic"], values.get("semantic", 0.0), candidate.semantic_rank, k),
            "token": _list_part(lists["token"], values.get("token", 0.0), candidate.token_rank, k),
            "recency": round(w_recency * 0.5 ** (age_days / half_life), 6),
            # Read with the row (fts.RECALL_COLUMNS); None before the memory's first recall.
            "signal": round(w_signal * (row.recall_signal or 0.0), 6),
        }


# A candidate that matched less than this share of its list's best match, in every list that found it, is not an
# answer, whatever its rank, recency and recall signal: those order the matches, they do not make one. Strength is
# each list's own measure against its own best (the word index's re-ranked bm25, the trigram index's bm25; a
# semantic hit counts as strong when it is as near the query as the median lexical candidate, the semantic list's
# own bar), so equally good matches stay whatever their number, and a memory sharing one common word with the
# question does not pad the results beside one that answers it. Without the cut such a memory, recalled, would
# also raise its own signal.
RELATIVE_CUT = 0.1


def fusion(found: Candidates, plan: RecallPlan) -> list[RecallCandidate]:
    """Stage 3: one ranking, by the sum of the parts (ties by filename, then root), without the candidates far
    weaker than the best (RELATIVE_CUT); with ranking-only rows, the first top_k read whole."""
    for candidate in found.by_entry.values():
        candidate.score = round(sum(candidate.parts.values()), 6)
    ranked = sorted(found.by_entry.values(), key=lambda c: (-c.score, c.row.filename, c.row.root_key))
    if RELATIVE_CUT > 0:
        ranked = [candidate for candidate in ranked if candidate.strength >= RELATIVE_CUT]
    return _read_placed(ranked, plan.top_k, found.rows) if found.ranking_only else ranked


def shadowing(ranked: list[RecallCandidate], found: Candidates,
              plan: RecallPlan) -> tuple[list[RecallCandidate], list[RecallCandidate]]:
    """Stage 4: the first top_k winners down the ranking. A memory that a deeper scope also holds (the same
    type::slug) is shadowed: it would have been a result, so it is reported beside the winners (never silently
    dropped), but it is not a winner."""
    top_k = plan.top_k
    # Only the head of the ranking can become results; look its holders up first and the rest only if needed.
    deepest = _deepest_holders(ranked[: top_k * 3], found.holders)
    winners: list[RecallCandidate] = []
    shadowed: list[RecallCandidate] = []
    for position, candidate in enumerate(ranked):
        if len(winners) >= top_k:
            break
        if position == top_k * 3:
            deepest.update(_deepest_holders(ranked[position:], found.holders))
        depth, identity = deepest.get(candidate.key, (candidate.depth, candidate.identity()))
        if depth > candidate.depth:
            candidate.shadowed_by = identity
            shadowed.append(candidate)
        else:
            winners.append(candidate)
    return winners, shadowed


def packaging(plan: RecallPlan, winners: list[RecallCandidate], shadowed: list[RecallCandidate],
              warning: str | None) -> Recall:
    """Stage 5: whole bodies for what is returned only, and each one's snippet cut from the passage that
    matched."""
    returned = winners + shadowed
    with sql.cursor() as cursor:
        bodies = fts.entry_bodies(cursor, [candidate.row.entry_id for candidate in returned])
    for candidate in returned:
        candidate.row.body = bodies.get(candidate.row.entry_id, candidate.row.passage)
        candidate.snippet = snippet(plan.pattern, candidate.row.passage, plan.fragments)
    return Recall(plan.query, winners, shadowed, warning)


def _word_list(cursor, plan: RecallPlan, rows: fts.RowCache) -> list[RecallRow]:  # noqa: ANN001
    """The word index's candidates: bm25 re-ranked (rerank), then with session context."""
    found = fts.recall_unicode(cursor, expression=plan.expression, root_keys=plan.root_keys,
                               include_system=plan.include_system, limit=plan.pool, owners=plan.visible,
                               split=plan.split, rows=rows, scoped=plan.scoped)
    return with_session_context(
        cursor, rerank(plan.query, [RecallRow(*values) for values in found], plan.pattern), plan.pattern,
        context=plan.settings.context, include_system=plan.include_system, limit=plan.pool,
        generation=plan.generation)


def _read_placed(ranked: list[RecallCandidate], top_k: int, rows: fts.RowCache | None = None) -> list[RecallCandidate]:
    """The ranking with whole rows for the trigram- and semantic-only candidates among its first `top_k`, which hold
    only what ranked them (fts.RANKING_COLUMNS; nothing is shadowed, so no candidate below them is looked at). A memory
    deleted since it was ranked leaves the ranking, and the next one moves up."""
    while True:
        pending = {candidate.row.chunk_id: candidate for candidate in ranked[:top_k] if candidate.row.passage is None}
        if not pending:
            return ranked
        with sql.cursor() as cursor:
            found = {values[-2]: values for values in fts.chunk_rows(cursor, sorted(pending), rows=rows)}
        for chunk_id, candidate in pending.items():
            if chunk_id in found:
                candidate.row = RecallRow(*found[chunk_id])
        gone = {id(candidate) for chunk_id, candidate in pending.items() if chunk_id not in found}
        if not gone:
            return ranked
        ranked = [candidate for candidate in ranked if id(candidate) not in gone]


def _rank_score(rank: int | None, k: float) -> float:
    """Reciprocal rank, scaled so that a list's first entry scores 1: k/(k+rank)."""
    return 0.0 if rank is None else k / (k + rank)


# A list's part is half its value (how well the candidate matches, relative to the list's best: near-equal matches
# stay near-equal) and half its reciprocal rank (robust to how a list's scores are spread: one outlier does not flatten
# the rest). Ranks alone turned near-ties into steep steps (0.97 of the best match at rank 5 scored a sixth of rank 0);
# values alone let a list's long tail of middling matches outvote a decisive list.
VALUE_SHARE = 0.5


def _list_part(weight: float, value: float, rank: int | None, k: float) -> float:
    return round(weight * (VALUE_SHARE * value + (1 - VALUE_SHARE) * _rank_score(rank, k)), 6)


def list_weights(configured: dict[str, float], decisive: dict[str, float]) -> dict[str, float]:
    """The configured weights scaled by the square root of each list's decisiveness for this question, rescaled to
    their configured sum (so recency and the recall signal keep their share). When no list is decisive, the
    configured weights.

    The square root because decisiveness is a sign, not a certainty (it tells a list's hits from its misses at an
    AUC of 0.65-0.89): a list half as decisive keeps 71% of its weight. Taken whole (scaled by decisiveness itself)
    the curated-facts dev set fell 0.6 points; taken not at all, the FAQ set fell 1.8 (docs/benchmarks.md)."""
    scaled = {name: weight * math.sqrt(decisive.get(name, 0.0)) for name, weight in configured.items()}
    total = sum(scaled.values())
    if total <= 0:
        return dict(configured)
    factor = sum(configured.values()) / total
    return {name: weight * factor for name, weight in scaled.items()}


def _side_lists(query: RecallQuery, *, trigram_expression: str | None, root_keys: list[str], include_system: bool,
                pool: int, visible: owners.Owners, generation: int, semantic: bool,
                scoped: bool = False) -> tuple[list[tuple], SemanticScores | None, EmbedderError | None]:
    """What recall needs that does not depend on the word index's ranking: the trigram ranking (as stubs: entry
    id, score, chunk id) and the semantic similarities, or the embedder's error. Runs in whichever thread
    side_thread gives it, on that thread's connection."""
    with sql.cursor() as cursor:
        trigram = fts.recall_trigram(cursor, expression=trigram_expression, root_keys=root_keys,
                                     include_system=include_system, limit=pool, owners=visible,
                                     stubs=True, scoped=scoped) if trigram_expression else []
    if not semantic:
        return trigram, None, None
    try:
        return trigram, semantic_scores(query, root_keys=root_keys, include_system=include_system, limit=pool,
                                        generation=generation), None
    except EmbedderError as exc:
        return trigram, None, exc
