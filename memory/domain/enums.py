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
    # Brought in from another tool's memory by `compozy import` (Claude Code's auto-memory).
    IMPORT = "import"
    # Brought by `memory sync`'s `git pull --rebase` from another machine.
    SYNC = "sync"


# Decisions that record a file someone else put on disk (a hand edit, a pull): applying one only indexes it.
EXTERNAL_ORIGINS = frozenset({Origin.FILE, Origin.SYNC})

# Autonomous writers must never overwrite a memory only because a generated slug collided.
# An import is one too: a Claude Code file named like an existing memory must not replace it on first import.
AUTONOMOUS_ORIGINS = frozenset({Origin.EXTRACTOR, Origin.DREAMING, Origin.PROVIDER, Origin.IMPORT})


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
    # A memory root whose decisions cannot be applied now (full or read-only filesystem, workspace moved) and the
    # retry that applied them once it could be written again.
    ROOT_HELD = "memory.root.held"
    ROOT_RELEASED = "memory.root.released"
    # Sessions: the ledger's lifecycle, checkpoint continuity and pressure compaction. Ledger appends
    # are not memory events; these mark what an operator follows (a checkpoint that failed, a span archived).
    SESSION_STARTED = "memory.session.started"
    SESSION_STOPPED = "memory.session.stopped"
    SESSION_CHECKPOINT_UPDATED = "memory.session.checkpoint.updated"
    SESSION_CHECKPOINT_FAILED = "memory.session.checkpoint.failed"
    SESSION_COMPACTION_COVERED = "memory.session.compaction.covered"
    SESSION_COMPACTION_ARCHIVED = "memory.session.compaction.archived"
    SESSION_COMPACTION_FAILED = "memory.session.compaction.failed"
    SESSION_HOOK_FAILED = "memory.session.hook.failed"


DECISION_EVENT = {
    Op.ADD: EventOp.WRITE_COMMITTED,
    Op.UPDATE: EventOp.WRITE_COMMITTED,
    Op.DELETE: EventOp.WRITE_COMMITTED,
    Op.REJECT: EventOp.WRITE_REJECTED,
    Op.NOOP: EventOp.WRITE_SHADOWED,
}


# ----- sessions -------------------------------------------------------------------------------------------------


class SessionType(StrEnum):
    USER = "user"
    COORDINATOR = "coordinator"
    DREAM = "dream"
    SYSTEM = "system"


# A stopped session of these types updates the workspace checkpoint. `system` sessions are the machine's own work
# (the summariser among them) and never feed the checkpoint they would be summarising into.
CHECKPOINT_TYPES = frozenset({SessionType.USER, SessionType.COORDINATOR, SessionType.DREAM})


class SessionStatus(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    # A snapshot was asked for this session id (`memory snapshot --session`), and its bytes are frozen, but no
    # ledger session was started: it never shows as running and holds no events until `session start`.
    SNAPSHOT = "snapshot"


class ExtractorState(StrEnum):
    """A session's extractor run: none (`idle`), waiting on the task cluster (`queued`) or in progress."""

    IDLE = "idle"
    QUEUED = "queued"
    RUNNING = "running"


class SessionEventKind(StrEnum):
    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    DONE = "done"
    ERROR = "error"


# The events a transcript projection carries: what was said and done, not the bookkeeping around it.
MESSAGE_KINDS = frozenset({SessionEventKind.USER_MESSAGE, SessionEventKind.ASSISTANT_MESSAGE,
                           SessionEventKind.TOOL_CALL, SessionEventKind.TOOL_RESULT, SessionEventKind.ERROR})
# A turn is complete once one of these is persisted for it.
TURN_END_KINDS = frozenset({SessionEventKind.DONE, SessionEventKind.ERROR})
