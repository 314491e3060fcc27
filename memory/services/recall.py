"""The recall noun: memory_search. Ranks memories for a natural-language query within the visible scopes."""

from __future__ import annotations

from django.db import connection
from pydantic import Field

from memory.controller.best_effort import best_effort_write
from memory.controller.events import event_record
from memory.domain.enums import EventOp
from memory.domain.errors import ValidationError
from memory.domain.models import utc_now
from memory.recall.package import HEADER, block, recall_section_text, staleness_banner
from memory.recall.pipeline import Recall, RecallCandidate, prepare_token_list, recall
from memory.recall.query import parse_query

from .inputs import Caller, ReadSelector
from .resolution import Resolved, narrowed_to_global, resolve
from .results import RecallBlock, SearchHit, SearchResult, WhyRecalled, memory_summary_from_fields
from .scopes import visible_refs

# EMA of the recall score: 0.8 of the old value plus 0.2 of the new.
SIGNAL_DECAY = 0.8


class SearchInput(ReadSelector):
    query: str = Field(max_length=4000, description=(
        "A question or task in natural language (or a single word). A query with no meaningful word at all "
        "(only stopwords or one-letter words) is skipped: the result says skipped: true."))
    top_k: int | None = Field(default=None, ge=1, description=(
        "How many memories to return: default 5 (memory.recall.top_k), at most 20 (a larger value is lowered)."))


def recall_prepare() -> bool:
    """What recall derives once from the model (the token-match list's neighbour table, about 5 s the first time in
    a home), done ahead of the first question; False when the embedder needs none."""
    return prepare_token_list()


def memory_search(*, data: SearchInput, caller: Caller, record: bool = True) -> SearchResult:
    """`record=False` previews a recall (the inspector's playground) without touching signals or events, so an
    operator's experiments never count as an agent's recall."""
    resolved = resolve(data, caller)
    settings = resolved.config.memory.recall
    top_k = settings.top_k if data.top_k is None else data.top_k
    if top_k < 1:
        raise ValidationError("top_k must be at least 1.", details={"field": "top_k", "reason": "range"})
    top_k = min(top_k, settings.max_top_k)
    refs = visible_refs(data, resolved)
    query = parse_query(data.query)
    if query.trivial:
        if record:
            event_record(op=EventOp.RECALL_SKIPPED, workspace_id=resolved.workspace_id,
                         session_id=caller.session_id or "", actor=caller.origin.value,
                         scope=data.scope.value if data.scope else "", agent_name=data.agent_name or "",
                         metadata={"reason": "trivial_query", "terms": len(query.terms)})
        return SearchResult(results=[], recall=RecallBlock(header=HEADER, blocks=[]), skipped=True,
                            skip_reason="no_meaningful_words")
    now = utc_now()
    outcome = recall(query, refs=refs, config=resolved.config, top_k=top_k, include_system=data.include_system,
                     now=now)
    banner_days = settings.freshness.banner_after_days
    hits = [_hit(candidate, staleness_banner(candidate.updated_at, now, banner_days))
            for candidate in _ordered(outcome)]
    blocks = [block(c, staleness_banner(c.updated_at, now, banner_days)) for c in outcome.winners]
    if record:
        record_recall(outcome, data.query, caller, resolved, now, top_k=top_k, scope=data.scope,
                      agent_name=data.agent_name or "", agent_tier=data.agent_tier or "")
    narrowed = narrowed_to_global(data.scope, resolved, caller, done="searched")
    warnings = [text for text in (narrowed, outcome.warning) if text]
    return SearchResult(results=hits, recall=RecallBlock(header=HEADER, blocks=blocks), skipped=False,
                        warning="; ".join(warnings) or None)


def recall_prompt_text(recall_block: RecallBlock) -> str:
    """The recall block exactly as a session's snapshot would carry it."""
    return recall_section_text(recall_block.header, recall_block.blocks)


def record_recall(outcome: Recall, query_text: str, caller: Caller, resolved: Resolved, now, *,  # noqa: ANN001
                  top_k: int, scope: object = None, agent_name: str = "", agent_tier: str = "") -> None:
    """The signals of the entries returned and the executed event, in one transaction after the answer.

    Best effort: when another process holds the database's write lock (a long reindex, say), waiting for it
    would hold the answer back, so after a short wait the bookkeeping is skipped and logged instead."""

    def write() -> None:
        _update_signals(outcome, now, _session_key(caller, now))
        event_record(op=EventOp.RECALL_EXECUTED,
                     metadata={"result_count": len(outcome.winners), "shadowed_count": len(outcome.shadowed),
                               "top_k": top_k, "terms": len(outcome.query.terms)},
                     workspace_id=resolved.workspace_id, session_id=caller.session_id or "",
                     actor=caller.origin.value, scope=getattr(scope, "value", "") or "",
                     # With scope agent, the event names the agent and tier, so history can say whose.
                     agent_name=agent_name if getattr(scope, "value", "") == "agent" else "",
                     agent_tier=(agent_tier or "workspace") if getattr(scope, "value", "") == "agent" else "")

    best_effort_write(write, what="recall signals and event")


def _ordered(outcome: Recall) -> list[RecallCandidate]:
    """Winners by rank; each shadowed entry right after the winner that shadows it when that winner is listed,
    otherwise after all winners."""
    placed: list[RecallCandidate] = []
    pending = list(outcome.shadowed)
    for winner in outcome.winners:
        placed.append(winner)
        for shadowed in [s for s in pending if s.key == winner.key]:
            placed.append(shadowed)
            pending.remove(shadowed)
    return placed + pending


def _hit(candidate: RecallCandidate, banner: str | None) -> SearchHit:
    return SearchHit(
        memory=memory_summary_from_fields(vars(candidate.row)),
        score=candidate.score,
        snippet=candidate.snippet or candidate.body[:200],
        why_recalled=WhyRecalled(**candidate.parts),
        shadowed_by=candidate.shadowed_by,
        banner=banner,
    )


def _session_key(caller: Caller, now) -> str:  # noqa: ANN001
    """Whose recall this is, for counting: the caller's session, or, for a caller without one (a person at the
    CLI), the hour it searched in, so an afternoon of searching counts as a few sessions, not as hundreds."""
    return caller.session_id or f"{caller.origin.value}@{now:%Y-%m-%dT%H}"


def _update_signals(outcome: Recall, now, session_key: str) -> None:  # noqa: ANN001
    """Each winner's signal moves once per session (memory_recall_sessions): its count counts distinct sessions and
    its EMA takes one value a session, so one session searching again and again raises nothing."""
    if not outcome.winners:
        return
    stamp = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        first = []
        for candidate in outcome.winners:
            cursor.execute("INSERT OR IGNORE INTO memory_recall_sessions (root_key, filename, session_key, "
                           "recalled_at) VALUES (%s, %s, %s, %s)",
                           [candidate.root_key, candidate.filename, session_key, stamp])
            if cursor.rowcount == 1:
                first.append(candidate)
        if not first:
            return
        cursor.executemany(
            "INSERT INTO memory_recall_signals (root_key, filename, recall_count, recall_score, first_recalled_at, "
            "last_recalled_at, promoted_at) VALUES (%s, %s, 1, %s, %s, %s, NULL) "
            "ON CONFLICT(root_key, filename) DO UPDATE SET recall_count = recall_count + 1, "
            f"recall_score = {SIGNAL_DECAY} * recall_score + excluded.recall_score, "
            "last_recalled_at = excluded.last_recalled_at",
            [[c.root_key, c.filename, (1 - SIGNAL_DECAY) * c.score, stamp, stamp] for c in first],
        )
