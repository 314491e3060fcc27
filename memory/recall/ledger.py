"""The session ledger's own turns for a question, ranked as recall ranks curated memories.

A recall block ends with what was said in earlier sessions when curated memory has too little (memory/catalog/
turns_fts.py). Turns are short and conversational, the shape recall's word list was built for, so they are ranked
by the same two factors: bm25 scaled by the share of the question's terms a turn covers (pipeline.rerank), and
session context (pipeline.with_session_context): the turns said just after a match, in the same session, share
part of its value, because the answer to a question is usually its reply, which need not repeat its words.
"""

from __future__ import annotations

from compozy.config import RecallContext
from memory.catalog.turns_fts import TurnHit, search_turns, turn_successors

from .pipeline import COVERAGE_BOOST, term_pattern, terms_in
from .query import RecallQuery


def ledger_turns(query: RecallQuery, *, workspace_id: str, limit: int, context: RecallContext,
                 exclude_session: str = "") -> list[TurnHit]:
    """The workspace's turns for the question, best first, at most `limit` (bm25's first `limit` matches and the
    turns that follow them)."""
    hits = search_turns(query.prefix_expression() or "", workspace_id=workspace_id, limit=limit,
                        exclude_session=exclude_session)
    if not hits:
        return []
    pattern = term_pattern(query)
    terms = max(1, len(query.terms))
    turns: dict[tuple[str, int], TurnHit] = {}
    value: dict[tuple[str, int], float] = {}
    for hit in hits:
        key = (hit.session_id, hit.seq)
        turns[key] = hit
        # bm25 is negative, lower is better.
        value[key] = -hit.rank * (1 + COVERAGE_BOOST * len(terms_in(pattern, hit.content)) / terms)
    best = max(value.values())
    if best <= 0:
        return hits
    combined = {key: found / best for key, found in value.items()}
    if context.window and context.decay:
        anchors = list(value)
        for index, distance, turn in turn_successors(anchors, window=context.window):
            key = (turn.session_id, turn.seq)
            turns.setdefault(key, turn)
            combined[key] = combined.get(key, 0.0) + context.decay ** distance * value[anchors[index]] / best
    # Ties by time, then by the ledger's own order: the same question at the same state, the same turns.
    order = sorted(combined, key=lambda key: (-combined[key], turns[key].ts, key))
    return [turns[key] for key in order[:limit]]
