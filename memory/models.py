"""Tables of the memory system. Markdown on disk is the truth; the catalog tables are projections of it, the
decision table is the write-ahead log, and the event table is the canonical observability log."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Workspace(models.Model):
    """Known workspaces: the ULID is the identity, the path is only where it was last seen."""

    id = models.CharField(primary_key=True, max_length=26)
    path = models.TextField()
    realpath_at_creation = models.TextField()
    created_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        db_table = "memory_workspaces"


class Decision(models.Model):
    """memory_decisions: every controller decision lands here before any file mutation."""

    id = models.CharField(primary_key=True, max_length=28)
    candidate_hash = models.CharField(max_length=64, db_index=True)
    idempotency_key = models.CharField(max_length=64, unique=True)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    scope = models.CharField(max_length=16)
    agent_name = models.CharField(max_length=64, blank=True, default="")
    agent_tier = models.CharField(max_length=16, blank=True, default="")
    root_key = models.CharField(max_length=128)
    origin = models.CharField(max_length=16)
    op = models.CharField(max_length=8)
    targets = models.JSONField(default=list)
    target_filename = models.CharField(max_length=255)
    frontmatter = models.JSONField(null=True)
    post_content = models.TextField(blank=True, default="")
    post_content_hash = models.CharField(max_length=64, blank=True, default="")
    prior_content = models.TextField(null=True)
    prior_content_hash = models.CharField(max_length=64, blank=True, default="")
    confidence = models.FloatField(default=1.0)
    source = models.CharField(max_length=8, default="rule")
    rule_trace = models.JSONField(default=list)
    llm_trace = models.JSONField(null=True)
    reason = models.TextField(blank=True, default="")
    session_id = models.CharField(max_length=128, blank=True, default="")
    reverts = models.CharField(max_length=28, null=True, blank=True)
    decided_at = models.DateTimeField()
    applied_at = models.DateTimeField(null=True)
    # The order decisions were made in: one more than the largest so far, given at the durable insert under the
    # write lock. Everything that asks "which came first" (replay, a hand edit's prior content, revert, the file's
    # last decision) orders by it, never by decided_at: a wall clock can jump back.
    seq = models.BigIntegerField(null=True)

    class Meta:
        db_table = "memory_decisions"
        # A partial unique index (rows decided before the column existed were numbered by the migration): added as
        # CREATE UNIQUE INDEX, without rebuilding the table, and usable by MAX(seq) ... WHERE seq IS NOT NULL.
        constraints = [models.UniqueConstraint(fields=["seq"], condition=Q(seq__isnull=False), name="decision_seq")]
        indexes = [
            models.Index(fields=["decided_at", "id"], name="decision_order"),
            models.Index(fields=["root_key", "target_filename", "decided_at"], name="decision_file"),
            models.Index(fields=["applied_at"], name="decision_unapplied", condition=Q(applied_at__isnull=True)),
            models.Index(fields=["reverts"], name="decision_reverts"),
        ]


class Event(models.Model):
    """memory_events: one row per decision and per recall outcome, with canonical op names."""

    op = models.CharField(max_length=64)
    scope = models.CharField(max_length=16, blank=True, default="")
    agent_name = models.CharField(max_length=64, blank=True, default="")
    agent_tier = models.CharField(max_length=16, blank=True, default="")
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    session_id = models.CharField(max_length=128, blank=True, default="")
    actor = models.CharField(max_length=32, blank=True, default="")
    decision_id = models.CharField(max_length=28, null=True, blank=True)
    target = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict)
    ts = models.DateTimeField()

    class Meta:
        db_table = "memory_events"
        indexes = [
            models.Index(fields=["ts"], name="event_ts"),
            models.Index(fields=["op", "ts"], name="event_op_ts"),
            models.Index(fields=["workspace_id", "ts"], name="event_workspace_ts"),
            models.Index(fields=["session_id", "ts"], name="event_session_ts"),  # a session's history
        ]
        constraints = [
            # Replay may re-run the event step; one decision never gets its event twice.
            models.UniqueConstraint(
                fields=["decision_id", "op"], condition=Q(decision_id__isnull=False), name="event_once_per_decision"
            )
        ]


class CatalogEntry(models.Model):
    """memory_catalog_entries: one row per memory document on disk, keyed by root and filename."""

    root_key = models.CharField(max_length=128)
    scope = models.CharField(max_length=16)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    agent_name = models.CharField(max_length=64, blank=True, default="")
    agent_tier = models.CharField(max_length=16, blank=True, default="")
    filename = models.CharField(max_length=255)
    type = models.CharField(max_length=16)
    slug = models.CharField(max_length=200)
    entity_key = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    description = models.TextField()
    body_key = models.CharField(max_length=64)
    content_hash = models.CharField(max_length=64)
    size = models.IntegerField()
    mtime_ns = models.BigIntegerField(default=0)
    is_system = models.BooleanField(default=False)
    frontmatter = models.JSONField(default=dict)
    # The session the memory was first recorded in (its first `provenance.source_sessions` id): recall's session
    # context follows a session's memories in the order they were recorded.
    origin_session = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "memory_catalog_entries"
        constraints = [models.UniqueConstraint(fields=["root_key", "filename"], name="catalog_root_filename")]
        indexes = [
            models.Index(fields=["root_key", "entity_key"], name="catalog_entity"),
            models.Index(fields=["root_key", "body_key"], name="catalog_body"),
            models.Index(fields=["root_key", "updated_at"], name="catalog_recent"),
            models.Index(fields=["root_key", "name"], name="catalog_name"),
            models.Index(fields=["root_key", "origin_session", "created_at", "filename"], name="catalog_session"),
        ]


class Chunk(models.Model):
    """memory_chunks: the text the FTS5 tables index, one row per passage of a memory's body (a short body is one
    passage; joined by ordinal, the passages are the body), with the passage's embedding and the model that made
    it (empty with no vector)."""

    entry = models.ForeignKey(CatalogEntry, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.IntegerField(default=0)
    name = models.TextField()
    description = models.TextField()
    body = models.TextField()
    vector = models.BinaryField(null=True)
    # The passage's distinct token ids (uint16 bytes) from the tokenization that made its vector: what the
    # token-match list scores (memory/recall/token_match.py). Null from an embedder without a token table.
    tokens = models.BinaryField(null=True)
    vector_model = models.CharField(max_length=200, default="", blank=True)

    class Meta:
        db_table = "memory_chunks"


class HeldRoot(models.Model):
    """memory_held_roots: a memory root whose unapplied decisions cannot be applied now (its filesystem is full or
    read-only, its workspace is no longer where it was registered). Replay skips the root's decisions, keeping
    their order, and retries them on its next run; health reports the root with the reason."""

    root_key = models.CharField(primary_key=True, max_length=128)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    reason = models.CharField(max_length=32)
    message = models.TextField(blank=True, default="")
    decision_id = models.CharField(max_length=28)
    since = models.DateTimeField()
    last_attempt_at = models.DateTimeField()
    attempts = models.IntegerField(default=1)

    class Meta:
        db_table = "memory_held_roots"


class MemoryState(models.Model):
    """Small shared counters, such as the memory generation that snapshots are cached by."""

    key = models.CharField(primary_key=True, max_length=64)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "memory_state"


class RecallSignal(models.Model):
    """memory_recall_signals: how often and how well each memory was recalled. Keyed by root and filename,
    never by catalog row id, because reindex may rebuild rows."""

    root_key = models.CharField(max_length=128)
    filename = models.CharField(max_length=255)
    recall_count = models.IntegerField(default=0)
    recall_score = models.FloatField(default=0.0)
    first_recalled_at = models.DateTimeField()
    last_recalled_at = models.DateTimeField()
    promoted_at = models.DateTimeField(null=True)
    # The dreaming run that promoted it; stamped with promoted_at, only once that run's decision is durable.
    # db_default: recall inserts signals with raw SQL that names no such column.
    promoted_run = models.CharField(max_length=30, blank=True, default="", db_default="")

    class Meta:
        db_table = "memory_recall_signals"
        constraints = [models.UniqueConstraint(fields=["root_key", "filename"], name="signal_root_filename")]


class RecallSession(models.Model):
    """memory_recall_sessions: which sessions recalled each memory. A memory's signal (count and score) moves once
    per session, however often that session searches: an agent repeating a search is not evidence that a memory
    matters across sessions, which is what dreaming's signal gate asks."""

    root_key = models.CharField(max_length=128)
    filename = models.CharField(max_length=255)
    session_key = models.CharField(max_length=200)
    recalled_at = models.DateTimeField()

    class Meta:
        db_table = "memory_recall_sessions"
        constraints = [models.UniqueConstraint(fields=["root_key", "filename", "session_key"],
                                               name="recall_session_once")]


class Snapshot(models.Model):
    """memory_snapshots: assembled snapshot text, cached by (boot request, memory generation)."""

    request_hash = models.CharField(max_length=64)
    generation = models.BigIntegerField()
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    entries = models.JSONField(default=list)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "memory_snapshots"
        constraints = [models.UniqueConstraint(fields=["request_hash", "generation"], name="snapshot_request_gen")]


class Session(models.Model):
    """memory_sessions: the session ledger's head. One row per session: who ran it, where, of which type, and the
    frozen snapshot it started with (a sub-agent points at its parent's). Starting a session freezes it."""

    session_id = models.CharField(primary_key=True, max_length=128)
    parent_session_id = models.CharField(max_length=128, blank=True, default="")
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    agent_name = models.CharField(max_length=64, blank=True, default="")
    type = models.CharField(max_length=16, default="user")  # user, coordinator, dream, system
    status = models.CharField(max_length=16, default="running")  # running, stopped
    snapshot = models.ForeignKey(Snapshot, on_delete=models.PROTECT, related_name="sessions")
    started_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True)
    context_window = models.IntegerField(null=True)
    last_usage = models.IntegerField(null=True)
    last_usage_at = models.DateTimeField(null=True)
    # The last seq handed out. Appends raise it in the transaction that inserts the rows, so seq is gap-free.
    last_seq = models.IntegerField(default=0)
    # A failed compaction summary holds further summaries back until then; nothing is archived meanwhile.
    compaction_cooldown_until = models.DateTimeField(null=True)
    # How far a client's transcript (Claude Code's JSONL) has been read, in bytes: each hook reads on from here, at
    # most session.hooks.transcript_read_bytes a call, so a huge transcript is imported over several calls and a
    # bad line is passed over once. Lines are keyed, so reading some again after a crash only finds duplicates.
    transcript_offset = models.BigIntegerField(default=0)

    class Meta:
        db_table = "memory_sessions"
        indexes = [models.Index(fields=["workspace_id", "started_at"], name="session_workspace_started")]


class SessionEvent(models.Model):
    """memory_session_events: what happened in a session, in order. Kept out of the memory write path: these rows
    are the raw record that checkpoints and compaction summarise, never memories themselves."""

    session_id = models.CharField(max_length=128)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    seq = models.IntegerField()
    turn_id = models.CharField(max_length=128, blank=True, default="")
    kind = models.CharField(max_length=24)
    agent_name = models.CharField(max_length=64, blank=True, default="")
    content = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict)
    ts = models.DateTimeField()
    # Covered by the checkpoint (pressure compaction): still readable, left out of degraded-resume replay.
    archived = models.BooleanField(default=False)
    # The caller's identity for the row (a transcript line's uuid): importing the same line twice is a no-op.
    external_key = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        db_table = "memory_session_events"
        constraints = [
            models.UniqueConstraint(fields=["session_id", "seq"], name="session_event_seq"),
            models.UniqueConstraint(fields=["session_id", "external_key"], condition=~Q(external_key=""),
                                    name="session_event_external_key"),
        ]


class SessionCoverage(models.Model):
    """memory_session_coverage: the seq ranges of a session already summarised into the workspace checkpoint.
    Committed before the rows are marked archived; adjacent ranges are merged into one row."""

    workspace_id = models.CharField(max_length=26, blank=True, default="")
    session_id = models.CharField(max_length=128)
    from_seq = models.IntegerField()
    to_seq = models.IntegerField()
    decision_id = models.CharField(max_length=28, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "memory_session_coverage"
        indexes = [models.Index(fields=["session_id", "from_seq"], name="coverage_session_from")]


class Injection(models.Model):
    """memory_injections: which entries each session's snapshot placed in its prompt, and from where."""

    session_id = models.CharField(max_length=128)
    generation = models.BigIntegerField()
    root_key = models.CharField(max_length=128)
    scope = models.CharField(max_length=16)
    agent_name = models.CharField(max_length=64, blank=True, default="")
    agent_tier = models.CharField(max_length=16, blank=True, default="")
    filename = models.CharField(max_length=255)
    source = models.CharField(max_length=16)  # "index", "recall" or "checkpoint"
    position = models.IntegerField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "memory_injections"
        indexes = [
            models.Index(fields=["session_id", "position"], name="injection_session"),
            models.Index(fields=["root_key", "filename"], name="injection_entry"),
        ]


class Job(models.Model):
    """memory_jobs: long operator work (a reindex started from the inspector) run by the task cluster, with its
    progress, so any page or process can follow it."""

    id = models.CharField(primary_key=True, max_length=26)
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=16)  # queued, running, succeeded, failed
    input = models.JSONField(default=dict)
    origin = models.CharField(max_length=16)
    done = models.IntegerField(default=0)
    total = models.IntegerField(default=0)
    result = models.JSONField(null=True)
    error = models.JSONField(null=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "memory_jobs"


class PrunedDecision(models.Model):
    """memory_pruned_decisions: the ids retention deleted, so a later show or revert of one can say it was pruned
    rather than that it never existed. Holds no content."""

    id = models.CharField(primary_key=True, max_length=28)
    root_key = models.CharField(max_length=128)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    target_filename = models.CharField(max_length=255)
    op = models.CharField(max_length=8)
    decided_at = models.DateTimeField()
    applied_at = models.DateTimeField()
    pruned_at = models.DateTimeField()

    class Meta:
        db_table = "memory_pruned_decisions"


class Consolidation(models.Model):
    """memory_consolidations: one row per dreaming run, `running` then `completed`, `failed` or `canceled`, with
    the gates it passed, its candidates and their scores, its artifact, synthesis, decision and timings."""

    id = models.CharField(primary_key=True, max_length=30)
    workspace_id = models.CharField(max_length=26)
    status = models.CharField(max_length=16)
    trigger = models.CharField(max_length=16)  # schedule, manual or retry
    actor = models.CharField(max_length=32)  # the surface origin, or "schedule" / "recovery"
    forced = models.BooleanField(default=False)
    retry_of = models.CharField(max_length=30, null=True, blank=True)
    # The lock owner (host:pid:process start:token), how start-up recovery tells a dead runner from a live one.
    owner = models.CharField(max_length=128)
    step = models.CharField(max_length=16, blank=True, default="")
    gates = models.JSONField(default=list)
    eligible = models.IntegerField(default=0)
    candidates = models.JSONField(default=list)
    artifact = models.CharField(max_length=255, blank=True, default="")
    synthesis = models.JSONField(null=True)
    synthesis_filename = models.CharField(max_length=255, blank=True, default="")
    # Saved before the synthesis is submitted: recovery finds the run's decision by it.
    candidate_hash = models.CharField(max_length=64, blank=True, default="")
    decision_id = models.CharField(max_length=28, null=True, blank=True)
    decision_op = models.CharField(max_length=8, blank=True, default="")
    promoted = models.IntegerField(default=0)
    error = models.JSONField(null=True)
    timings = models.JSONField(default=dict)
    recovered = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "memory_consolidations"
        indexes = [
            models.Index(fields=["workspace_id", "started_at"], name="consolidation_workspace"),
            models.Index(fields=["workspace_id", "status", "finished_at"], name="consolidation_status"),
        ]


class DreamLock(models.Model):
    """memory_dream_locks: one runner per workspace. A lock past its expiry is stale and is taken over."""

    workspace_id = models.CharField(primary_key=True, max_length=26)
    owner = models.CharField(max_length=128)
    run_id = models.CharField(max_length=30)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "memory_dream_locks"


class ExtractorSession(models.Model):
    """memory_extractor_sessions: per session, how far the extractor has read and whether a run is queued or in
    progress. One run at a time per session: requests that arrive meanwhile only raise `pending`, and the run, when
    it ends, queues one follow-up that reads everything new."""

    session_id = models.CharField(primary_key=True, max_length=128)
    workspace_id = models.CharField(max_length=26, blank=True, default="")
    # Turns up to this seq have been read (extracted, or skipped as ineligible).
    last_seq = models.IntegerField(default=0)
    status = models.CharField(max_length=16, default="idle")  # idle, queued, running
    # The run that owns the session while queued or running; a run past its deadline is taken over.
    run_id = models.CharField(max_length=26, blank=True, default="")
    deadline_at = models.DateTimeField(null=True)
    pending = models.IntegerField(default=0)
    runs = models.IntegerField(default=0)
    candidates = models.IntegerField(default=0)
    last_outcome = models.CharField(max_length=16, blank=True, default="")  # completed, failed, dropped
    last_error = models.CharField(max_length=500, blank=True, default="")
    last_run_at = models.DateTimeField(null=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "memory_extractor_sessions"
        indexes = [models.Index(fields=["status", "updated_at"], name="extractor_status")]


class ImportRecord(models.Model):
    """memory_imports: what `compozy import` brought in from another tool, one row per source file, so that a
    second import adds nothing, an edited source becomes an update of the memory it made, and a memory the user
    deleted since is reported instead of coming back."""

    source = models.CharField(max_length=32)  # the tool: claude-code
    source_key = models.CharField(max_length=1024)  # the file's path relative to the tool's folder
    source_hash = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)  # memory or transcript
    root_key = models.CharField(max_length=200, blank=True, default="")
    filename = models.CharField(max_length=255, blank=True, default="")
    decision_id = models.CharField(max_length=32, blank=True, default="")
    imported_at = models.DateTimeField()

    class Meta:
        db_table = "memory_imports"
        constraints = [models.UniqueConstraint(fields=["source", "source_key"], name="import_source_key")]
