"""Result models. Every surface renders these same models, so parity holds by construction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from memory.models import CatalogEntry, Decision


def iso(value: datetime | None) -> str | None:
    """RFC 3339 in UTC. Naive values come from raw SQL reads of UTC columns."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.isoformat() + "Z"
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class MemoryBrief(Result):
    """What a list item carries by default: enough to choose a memory and show it, small enough that a page of
    fifty fits an agent's context."""

    filename: str
    name: str
    description: str
    type: str
    scope: str
    agent_name: str | None
    agent_tier: str | None
    updated_at: str | None


class MemorySummary(MemoryBrief):
    workspace_id: str | None
    created_at: str | None
    size: int
    content_hash: str
    is_system: bool


BRIEF_FIELDS = set(MemoryBrief.model_fields)


def memory_brief(summary: MemorySummary) -> MemoryBrief:
    return MemoryBrief(**summary.model_dump(include=BRIEF_FIELDS))


def memory_summary_from_fields(fields: dict[str, Any]) -> MemorySummary:
    return MemorySummary(
        filename=fields["filename"],
        name=fields["name"],
        description=fields["description"],
        type=fields["type"],
        scope=fields["scope"],
        agent_name=fields["agent_name"] or None,
        agent_tier=fields["agent_tier"] or None,
        workspace_id=fields["workspace_id"] or None,
        created_at=iso(fields["created_at"]),
        updated_at=iso(fields["updated_at"]),
        size=fields["size"],
        content_hash=fields["content_hash"],
        is_system=fields["is_system"],
    )


def memory_summary(entry: CatalogEntry) -> MemorySummary:
    return memory_summary_from_fields(entry.__dict__)


class Page(Result):
    total: int
    limit: int
    has_more: bool
    next_cursor: str | None


class MemoryList(Result):
    # Brief items unless the caller asked for detail.
    memories: list[MemorySummary] | list[MemoryBrief]
    page: Page
    # Set when no workspace was found and no scope named: only global memories were listed.
    warning: str | None = None


class MemoryDetail(Result):
    summary: MemorySummary
    content: str
    path: str
    banner: str | None = None


class MemoryShow(Result):
    memory: MemoryDetail


class RuleTraceEntry(Result):
    """One rule the controller applied, in order: whether it passed, why, and the file it was about."""

    name: str
    passed: bool
    reason: str
    target: str | None = None


class DecisionSummary(Result):
    id: str
    op: str
    origin: str
    source: str
    scope: str
    workspace_id: str | None
    agent_name: str | None
    agent_tier: str | None
    target_filename: str
    targets: list[str]
    reason: str
    confidence: float
    rule_trace: list[RuleTraceEntry]
    llm_trace: dict[str, Any] | None
    candidate_hash: str
    post_content_hash: str
    session_id: str | None
    reverts: str | None
    decided_at: str | None
    applied_at: str | None


class DecisionDetail(DecisionSummary):
    frontmatter: dict[str, Any] | None
    post_content: str
    prior_content: str | None
    idempotency_key: str


def _summary_fields(decision: Decision) -> dict[str, Any]:
    return {
        "id": decision.id,
        "op": decision.op,
        "origin": decision.origin,
        "source": decision.source,
        "scope": decision.scope,
        "workspace_id": decision.workspace_id or None,
        "agent_name": decision.agent_name or None,
        "agent_tier": decision.agent_tier or None,
        "target_filename": decision.target_filename,
        "targets": list(decision.targets or []),
        "reason": decision.reason,
        "confidence": decision.confidence,
        "rule_trace": list(decision.rule_trace or []),
        "llm_trace": decision.llm_trace,
        "candidate_hash": decision.candidate_hash,
        "post_content_hash": decision.post_content_hash,
        "session_id": decision.session_id or None,
        "reverts": decision.reverts,
        "decided_at": iso(decision.decided_at),
        "applied_at": iso(decision.applied_at),
    }


def decision_summary(decision: Decision) -> dict[str, Any]:
    return DecisionSummary(**_summary_fields(decision)).to_json()


def decision_detail(decision: Decision) -> DecisionDetail:
    return DecisionDetail(
        **_summary_fields(decision),
        frontmatter=decision.frontmatter,
        post_content=decision.post_content,
        prior_content=decision.prior_content,
        idempotency_key=decision.idempotency_key,
    )


class WriteResult(Result):
    decision: DecisionSummary
    applied: bool
    dry_run: bool


class RevertResult(Result):
    decision: DecisionSummary
    reverted: bool
    dry_run: bool


class DecisionList(Result):
    decisions: list[DecisionSummary]
    page: Page


class DecisionShow(Result):
    decision: DecisionDetail


class HistoryItem(Result):
    operation: str
    event: str
    filename: str
    scope: str
    agent_name: str | None
    agent_tier: str | None
    workspace_id: str | None
    decision_id: str | None
    actor: str
    ts: str | None


class HistoryList(Result):
    history: list[HistoryItem]
    page: Page


class ReindexRoot(Result):
    root_key: str
    files: int
    indexed: int
    rewritten_rows: int
    removed_rows: int
    external_decisions: list[str]
    invalid: list[dict[str, str]]
    temp_files_removed: int
    vectors_filled: int


class ReindexResult(Result):
    roots: list[ReindexRoot]
    files: int
    indexed: int
    external_decisions: int
    invalid: list[dict[str, str]]
    generation: int


class IndexCompaction(Result):
    """One full-text index before and after compaction: how many b-trees it was made of and the merge steps run."""

    index: str
    segments_before: int
    segments_after: int
    steps: int


class CompactResult(Result):
    indexes: list[IndexCompaction]


class WorkspaceHealth(Result):
    """One workspace in a health report: its own roots (the workspace scope and its agents' workspace tiers)."""

    id: str
    path: str
    # missing: the directory last seen for it no longer holds this workspace; only its catalog rows are counted.
    status: Literal["ok", "degraded", "missing"]
    files: int
    indexed_files: int
    drift_files: int
    invalid_files: int
    unapplied_decisions: int
    last_operation_at: str | None


class HeldRootReport(Result):
    """A memory root whose decisions wait: its filesystem is full or read-only, or its workspace is no longer at
    the registered path. The next replay (any command, the server every minute) retries it."""

    root_key: str
    workspace_id: str
    reason: str
    message: str
    decision_id: str
    since: str | None
    last_attempt_at: str | None
    attempts: int


class Health(Result):
    status: str
    reason: str
    global_files: int
    workspace_files: int
    workspace_count: int
    file_counts: dict[str, dict[str, int]]
    indexed_files: int
    orphaned_files: int
    unindexed_files: int
    modified_files: int
    invalid_files: list[dict[str, str]]
    drift: list[dict[str, Any]]
    unapplied_decisions: int
    # Roots replay could not write to; their decisions wait (in order) and the other roots carry on.
    held_roots: list[HeldRootReport]
    last_reindex: str | None
    operation_count: int
    last_operation_at: str | None
    generation: int
    # Whether the report covers every known workspace (all_workspaces) or only the caller's; a row per workspace
    # covered either way.
    all_workspaces: bool
    workspaces: list[WorkspaceHealth]
    dream: dict[str, Any]
    extractor: dict[str, Any]
    # Recall's vectors: the configured model, chunks without a vector, and chunks whose vector is another model's.
    vectors: dict[str, Any]
    # How many b-trees each full-text index is made of (1 when compact): every write adds one, and a question looks
    # its words up in each. `compozy memory compact` (and the cluster, every ten minutes) merges them.
    fts_segments: dict[str, int]


class WhyRecalled(Result):
    unicode: float
    trigram: float
    semantic: float
    token: float
    recency: float
    signal: float


class ShadowedBy(Result):
    """The memory of a deeper scope with the same type and slug, which wins over this one."""

    scope: str
    agent_name: str | None
    agent_tier: str | None
    workspace_id: str | None
    filename: str


class SearchHit(Result):
    memory: MemorySummary
    score: float
    snippet: str
    why_recalled: WhyRecalled
    shadowed_by: ShadowedBy | None
    banner: str | None


class RecallBlock(Result):
    header: str
    blocks: list[str]


class SearchResult(Result):
    results: list[SearchHit]
    recall: RecallBlock
    # A query with no meaningful word is not run: skipped is true and skip_reason says why.
    skipped: bool
    skip_reason: Literal["no_meaningful_words"] | None = None
    # Set when the answer is narrower than asked: no workspace was found (global memories only), or part of recall
    # could not run (the embedder failed: the results are from the lexical lists only).
    warning: str | None = None


class PruneRoot(Result):
    root_key: str
    workspace_id: str | None
    pruned: int
    kept: int


class RetryHeldResult(Result):
    """The periodic retry of held roots: the decisions it applied and the roots still held afterwards."""

    replayed: list[str]
    held_roots: list[HeldRootReport]


class PruneResult(Result):
    """Decision retention: how many applied decisions past the cutoff were pruned (or would be, on a dry run) and
    how many were kept because an existing file still needs them, per root."""

    dry_run: bool
    days: int
    cutoff: str
    pruned: int
    kept: int
    roots: list[PruneRoot]
