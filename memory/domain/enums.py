"""Closed vocabularies of the memory system. Nothing outside these sets is ever accepted."""

from __future__ import annotations

from enum import StrEnum


class MemoryType(StrEnum):
    USER = "user"
    FEEDBACK = "feedback"
    PROJECT = "project"
    REFERENCE = "reference"


class Scope(StrEnum):
    GLOBAL = "global"
    WORKSPACE = "workspace"
    AGENT = "agent"


class AgentTier(StrEnum):
    WORKSPACE = "workspace"
    GLOBAL = "global"


class Origin(StrEnum):
    CLI = "cli"
    HTTP = "http"
    UDS = "uds"
    TOOL = "tool"
    EXTRACTOR = "extractor"
    DREAMING = "dreaming"
    FILE = "file"
    PROVIDER = "provider"


# Autonomous writers must never overwrite a memory only because a generated slug collided.
AUTONOMOUS_ORIGINS = frozenset({Origin.EXTRACTOR, Origin.DREAMING, Origin.PROVIDER})


class Op(StrEnum):
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    NOOP = "noop"
    REJECT = "reject"


MUTATING_OPS = frozenset({Op.ADD, Op.UPDATE, Op.DELETE})


class RequestKind(StrEnum):
    """What the caller asked for; the controller decides the op."""

    WRITE = "write"
    DELETE = "delete"


class DecisionSource(StrEnum):
    RULE = "rule"
    LLM = "llm"


class ControllerMode(StrEnum):
    RULES = "rules"
    HYBRID = "hybrid"


class EventOp(StrEnum):
    WRITE_COMMITTED = "memory.write.committed"
    WRITE_REJECTED = "memory.write.rejected"
    WRITE_SHADOWED = "memory.write.shadowed"
    WRITE_REINDEX = "memory.write.reindex"
    WRITE_REVERTED = "memory.write.reverted"
    RECALL_EXECUTED = "memory.recall.executed"
    RECALL_SKIPPED = "memory.recall.skipped"
    DREAM_STARTED = "memory.dream.run.started"
    DREAM_PROMOTED = "memory.dream.run.promoted"
    DREAM_FAILED = "memory.dream.run.failed"
    EXTRACTOR_STARTED = "memory.extractor.started"
    EXTRACTOR_COMPLETED = "memory.extractor.completed"
    EXTRACTOR_FAILED = "memory.extractor.failed"
    EXTRACTOR_COALESCED = "memory.extractor.coalesced"
    EXTRACTOR_DROPPED = "memory.extractor.dropped"
    PROVIDER_ENABLED = "memory.provider.enabled"
    PROVIDER_DISABLED = "memory.provider.disabled"
    PROVIDER_COLLISION = "memory.provider.collision"
    WORKSPACE_RELOCATED = "memory.workspace.relocated"
    DECISIONS_PRUNED = "memory.decisions.pruned"


DECISION_EVENT = {
    Op.ADD: EventOp.WRITE_COMMITTED,
    Op.UPDATE: EventOp.WRITE_COMMITTED,
    Op.DELETE: EventOp.WRITE_COMMITTED,
    Op.REJECT: EventOp.WRITE_REJECTED,
    Op.NOOP: EventOp.WRITE_SHADOWED,
}
