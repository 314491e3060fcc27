"""The write controller: candidate → rules → durable decision → atomic file write → reindex and MEMORY.md →
event → applied_at. Every write from every surface comes through `submit`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection, transaction

from compozy.config import Config
from memory.catalog.indexer import advance_generation, index_file
from memory.catalog.queries import RootCatalogView
from memory.domain.document import parse_document, render_document
from memory.domain.enums import DECISION_EVENT, MUTATING_OPS, ControllerMode, EventOp, Op, Origin, RequestKind
from memory.domain.errors import Conflict, Rejected, ValidationError
from memory.domain.models import (
    Candidate,
    Frontmatter,
    Provenance,
    ScopeRef,
    canonical_json,
    format_timestamp,
    sha256_text,
    utc_now,
)
from memory.domain.names import INDEX_FILENAME, is_system_path
from memory.models import CatalogEntry, Decision, Event
from memory.providers.base import get_provider
from memory.store import files
from memory.store.index_md import render_index

from . import faults
from .lock import write_lock
from .roots import ref_from_row, resolve_root
from .rules import RuleSettings, Verdict, decide

MAX_SOURCE_SESSIONS = 32


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    applied: bool
    dry_run: bool


def rule_settings(config: Config) -> RuleSettings:
    controller = config.memory.controller
    mode = ControllerMode(controller.mode)
    tiebreaker = None
    if mode is ControllerMode.HYBRID:
        provider = get_provider(config)

        def tiebreaker(payload: dict[str, Any], timeout_ms: int) -> str:
            return provider.complete(task="tiebreaker", payload=payload, timeout_ms=timeout_ms)

    return RuleSettings(mode, controller.max_latency, Op(controller.default_op_on_fail), tiebreaker)


# ---------------------------------------------------------------------------------------------------------------
# Submitting a candidate


@contextmanager
def exclusive(config: Config) -> Iterator[None]:
    """Hold the write lock and finish any decision a crashed writer left unapplied before deciding anew.

    A long-running process (a server) booted before another process crashed; replaying here, not only at
    process start, keeps an older crashed write from later landing over a newer one.
    """
    with write_lock(config.memory.controller.lock_timeout):
        replay_unapplied()
        yield


def replay_unapplied() -> list[str]:
    """Apply unapplied decisions in decided_at, id order. The caller holds the write lock."""
    replayed: list[str] = []
    pending = Decision.objects.filter(applied_at__isnull=True)
    if not pending.exists():
        return replayed
    cleaned: set[str] = set()
    for decision in pending.order_by("decided_at", "id").iterator():
        ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
        root = resolve_root(ref)
        if root is None:
            continue  # its workspace is not on this machine (yet); health keeps reporting it
        if ref.root_key not in cleaned:
            files.remove_stale_temp_files(root)
            cleaned.add(ref.root_key)
        apply_decision(decision, root=root)
        replayed.append(decision.id)
    return replayed


def submit(candidate: Candidate, *, root: Path, config: Config, dry_run: bool = False) -> Outcome:
    with exclusive(config):
        target = candidate.target_filename or ""
        if target:
            # A hand edit of the target since the last reindex is recorded first, so prior_content is true.
            invalid = check_file(root, target) if dry_run else reconcile_file(candidate.ref, root, target).invalid_reason
            if invalid:
                raise Conflict(
                    f"{target} on disk is not a valid memory file ({invalid}); it is never overwritten. "
                    "Fix or remove it by hand, then retry.",
                    details={"filename": target, "reason": invalid},
                )
        previous = _same_candidate_same_state(candidate, root)
        if previous is not None:
            return _finish(Outcome(previous, applied=False, dry_run=dry_run))
        verdict = decide(candidate, RootCatalogView(candidate.ref.root_key), rule_settings(config))
        decision = build_decision(candidate, verdict, root=root)
        if dry_run:
            return _finish(Outcome(decision, applied=False, dry_run=True))
        stored = Decision.objects.filter(idempotency_key=decision.idempotency_key).first()
        if stored is not None:
            return _finish(Outcome(stored, applied=False, dry_run=False))
        persist_decision(decision)
        apply_decision(decision, root=root)
        return _finish(Outcome(decision, applied=decision.op in MUTATING_OPS, dry_run=False))


def _finish(outcome: Outcome) -> Outcome:
    if outcome.decision.op == Op.REJECT:
        from memory.services.views import decision_summary

        summary = decision_summary(outcome.decision)
        rules = [entry["reason"].removeprefix("rejected by ") for entry in outcome.decision.rule_trace
                 if not entry["passed"] and entry["name"] == "scan"]
        raise Rejected(
            "The memory was rejected by the content scanner: " + ", ".join(rules) + ".",
            details={"decision": summary, "rules": ",".join(rules).split(",") if rules else [],
                     "applied": outcome.applied, "dry_run": outcome.dry_run},
        )
    return outcome


def _same_candidate_same_state(candidate: Candidate, root: Path) -> Decision | None:
    """The stored decision for this candidate, if nothing in its root has changed since it was made."""
    previous = (
        Decision.objects.filter(candidate_hash=candidate.candidate_hash(), root_key=candidate.ref.root_key)
        .order_by("-decided_at", "-id")
        .first()
    )
    if previous is None:
        return None
    changed_since = Decision.objects.filter(
        root_key=previous.root_key, decided_at__gt=previous.decided_at, op__in=[op.value for op in MUTATING_OPS]
    ).exists()
    if changed_since:
        return None
    if previous.op in (Op.ADD, Op.UPDATE):
        current = files.read_bytes(root, previous.target_filename)
        if current is None or sha256_text(current.decode("utf-8", "replace")) != previous.post_content_hash:
            return None
    if previous.op == Op.DELETE and files.read_bytes(root, previous.target_filename) is not None:
        return None
    return previous


def build_decision(candidate: Candidate, verdict: Verdict, *, root: Path, now: datetime | None = None) -> Decision:
    now = now or utc_now()
    ref = candidate.ref
    prior_text: str | None = None
    if verdict.op in (Op.UPDATE, Op.DELETE):
        raw = files.read_bytes(root, verdict.target_filename)
        prior_text = raw.decode("utf-8") if raw is not None else None
    frontmatter: dict[str, Any] | None = None
    post_content = ""
    if verdict.op in (Op.ADD, Op.UPDATE):
        front = stamp_provenance(candidate, prior_text, now)
        frontmatter = front.yaml_dict()
        post_content = render_document(front, candidate.body)
    elif verdict.op == Op.NOOP and candidate.frontmatter is not None:
        frontmatter = candidate.frontmatter.yaml_dict()
    post_hash = sha256_text(post_content) if post_content else ""
    candidate_hash = candidate.candidate_hash()
    # The spec's key material, plus the state it was decided against (the target's last decision), so the
    # same candidate after, say, a delete is a new decision rather than a replay of the old one.
    base_state = last_decision_id(ref.root_key, verdict.target_filename)
    idempotency_key = sha256_text(
        canonical_json(
            [candidate_hash, verdict.op.value, verdict.targets, verdict.target_filename, post_hash,
             sha256_text(canonical_json(frontmatter)), base_state]
        )
    )
    return Decision(
        id="dec_" + sha256_text(idempotency_key)[:24],
        candidate_hash=candidate_hash,
        idempotency_key=idempotency_key,
        workspace_id=ref.workspace_id,
        scope=ref.scope.value,
        agent_name=ref.agent_name,
        agent_tier=ref.agent_tier.value if ref.agent_tier else "",
        root_key=ref.root_key,
        origin=candidate.origin.value,
        op=verdict.op.value,
        targets=verdict.targets,
        target_filename=verdict.target_filename,
        frontmatter=frontmatter,
        post_content=post_content,
        post_content_hash=post_hash,
        prior_content=prior_text,
        prior_content_hash=sha256_text(prior_text) if prior_text is not None else "",
        confidence=verdict.confidence,
        source=verdict.source.value,
        rule_trace=verdict.rule_trace,
        llm_trace=verdict.llm_trace,
        reason=verdict.reason,
        session_id=candidate.session_id or "",
        reverts=candidate.revert_of,
        decided_at=now,
        applied_at=None,
    )


def last_decision_id(root_key: str, filename: str) -> str | None:
    if not filename:
        return None
    return (
        Decision.objects.filter(root_key=root_key, target_filename=filename)
        .order_by("-decided_at", "-id")
        .values_list("id", flat=True)
        .first()
    )


def stamp_provenance(candidate: Candidate, prior_text: str | None, now: datetime) -> Frontmatter:
    """The controller owns provenance timestamps and the source-session list; callers cannot forge them."""
    front = candidate.frontmatter
    assert front is not None
    given = front.provenance or Provenance()
    created_at = format_timestamp(now)
    sessions = list(given.source_sessions)
    if prior_text is not None:
        try:
            prior = parse_document(prior_text).frontmatter.provenance
        except ValidationError:
            prior = None
        if prior is not None:
            created_at = prior.created_at or created_at
            sessions = list(prior.source_sessions) + sessions
    if candidate.session_id:
        sessions.append(candidate.session_id)
    unique_recent = list(dict.fromkeys(reversed(sessions)))[:MAX_SOURCE_SESSIONS]
    provenance = given.model_copy(
        update={
            "source_actor": given.source_actor or candidate.origin,
            "source_sessions": list(reversed(unique_recent)),
            "created_at": created_at,
            "updated_at": format_timestamp(now),
        }
    )
    return front.model_copy(update={"provenance": provenance})


def persist_decision(decision: Decision) -> None:
    """Commit the decision row durably (synchronous=FULL) before any file is touched."""
    durable = not connection.in_atomic_block
    if durable:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=FULL")
    try:
        with transaction.atomic():
            decision.save(force_insert=True)
    finally:
        if durable:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=NORMAL")
    faults.hit("after_decision_commit")


# ---------------------------------------------------------------------------------------------------------------
# Applying a decision (also the replay path: every step is idempotent)


def apply_decision(decision: Decision, *, root: Path) -> None:
    ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
    filename = decision.target_filename
    if decision.op in (Op.ADD, Op.UPDATE):
        current = files.read_bytes(root, filename)
        if current is None or sha256_text(current.decode("utf-8", "replace")) != decision.post_content_hash:
            if not root.is_dir():
                files.make_scope_dirs(root, with_inbox=ref.scope.value == "global")
            files.atomic_write(files.safe_path(root, filename), decision.post_content, step=faults.hit)
    elif decision.op == Op.DELETE:
        files.remove_file(files.safe_path(root, filename), step=faults.hit)
    if decision.op in MUTATING_OPS:
        with transaction.atomic():
            index_file(ref, root, filename)
            advance_generation()
        if not is_system_path(filename):
            render_memory_index(ref.root_key, root)
    faults.hit("after_reindex")
    record_decision_event(decision)
    faults.hit("before_applied")
    now = utc_now()
    Decision.objects.filter(id=decision.id, applied_at__isnull=True).update(applied_at=now)
    decision.applied_at = decision.applied_at or now


def render_memory_index(root_key: str, root: Path) -> None:
    entries = (
        CatalogEntry.objects.filter(root_key=root_key, is_system=False)
        .order_by("filename")
        .values_list("filename", "name", "description")
    )
    text = render_index(entries.iterator(chunk_size=2000))
    path = root / INDEX_FILENAME
    try:
        if path.read_text("utf-8") == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    files.atomic_write(path, text)


def decision_event_op(decision: Decision) -> EventOp:
    if decision.reverts and decision.op in MUTATING_OPS:
        return EventOp.WRITE_REVERTED
    return DECISION_EVENT[Op(decision.op)]


def record_decision_event(decision: Decision) -> None:
    op = decision_event_op(decision)
    if Event.objects.filter(decision_id=decision.id, op=op.value).exists():
        return
    metadata = {"decision_op": decision.op, "origin": decision.origin, "source": decision.source}
    if decision.op == Op.REJECT:
        metadata["rules"] = [e["reason"].removeprefix("rejected by ") for e in decision.rule_trace
                             if e["name"] == "scan" and not e["passed"]]
    if decision.reverts:
        metadata["reverts"] = decision.reverts
    try:
        with transaction.atomic():
            record_event(
                op,
                scope=decision.scope,
                agent_name=decision.agent_name,
                agent_tier=decision.agent_tier,
                workspace_id=decision.workspace_id,
                session_id=decision.session_id,
                actor=decision.origin,
                decision_id=decision.id,
                target=decision.target_filename,
                metadata=metadata,
            )
    except IntegrityError:
        pass  # another replay got there first; one event per decision


def record_event(op: EventOp, **fields: Any) -> Event:
    fields.setdefault("metadata", {})
    return Event.objects.create(op=op.value, ts=utc_now(), **fields)


# ---------------------------------------------------------------------------------------------------------------
# Hand edits: a file changed on disk outside the controller becomes a decision with origin `file`.


@dataclass(frozen=True)
class ReconcileResult:
    decision: Decision | None = None
    invalid_reason: str | None = None


def last_known_content(root_key: str, filename: str) -> str | None:
    """The file's content as the decision log last left it."""
    last = (
        Decision.objects.filter(root_key=root_key, target_filename=filename, applied_at__isnull=False,
                                op__in=[Op.ADD.value, Op.UPDATE.value, Op.DELETE.value])
        .order_by("-decided_at", "-id")
        .values_list("op", "post_content")
        .first()
    )
    if last is None or last[0] == Op.DELETE:
        return None
    return last[1]


def check_file(root: Path, filename: str) -> str | None:
    """Why the file on disk is not a valid memory document, or None when it is valid or absent."""
    raw = files.read_bytes(root, filename)
    if raw is None:
        return None
    try:
        parse_document(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "encoding"
    except ValidationError as exc:
        return exc.details.get("reason", "invalid")
    return None


def reconcile_file(ref: ScopeRef, root: Path, filename: str) -> ReconcileResult:
    disk = files.read_bytes(root, filename)
    entry = CatalogEntry.objects.filter(root_key=ref.root_key, filename=filename).values_list("content_hash", flat=True).first()
    if disk is None and entry is None:
        return ReconcileResult()
    text: str | None = None
    if disk is not None:
        try:
            text = disk.decode("utf-8")
        except UnicodeDecodeError:
            return ReconcileResult(invalid_reason="encoding")
        if entry is not None and sha256_text(text) == entry:
            return ReconcileResult()
        try:
            document = parse_document(text)
        except ValidationError as exc:
            # A broken hand edit is reported by health, never overwritten or deleted.
            return ReconcileResult(invalid_reason=exc.details.get("reason", "invalid"))
    now = utc_now()
    prior = last_known_content(ref.root_key, filename)
    op = Op.DELETE if text is None else Op.UPDATE if entry is not None or prior is not None else Op.ADD
    post = text or ""
    candidate_hash = sha256_text(canonical_json(["external", ref.root_key, filename, sha256_text(post), format_timestamp(now)]))
    frontmatter = document.frontmatter.yaml_dict() if text is not None else None
    idempotency_key = sha256_text(canonical_json([candidate_hash, op.value, [filename], filename,
                                                  sha256_text(post) if post else "",
                                                  sha256_text(canonical_json(frontmatter))]))
    notes = ""
    if text is not None:
        from memory.domain.scanner import scan

        result = scan(document.frontmatter.name, document.frontmatter.description, document.body)
        if not result.clean:
            notes = "; scanner flagged " + ",".join(result.rejected_rules)
    decision = Decision(
        id="dec_" + sha256_text(idempotency_key)[:24],
        candidate_hash=candidate_hash,
        idempotency_key=idempotency_key,
        workspace_id=ref.workspace_id,
        scope=ref.scope.value,
        agent_name=ref.agent_name,
        agent_tier=ref.agent_tier.value if ref.agent_tier else "",
        root_key=ref.root_key,
        origin=Origin.FILE.value,
        op=op.value,
        targets=[filename],
        target_filename=filename,
        frontmatter=frontmatter,
        post_content=post,
        post_content_hash=sha256_text(post) if post else "",
        prior_content=prior,
        prior_content_hash=sha256_text(prior) if prior is not None else "",
        confidence=1.0,
        source="rule",
        rule_trace=[{"name": "external_change", "passed": True,
                     "reason": f"the file changed on disk outside the controller{notes}", "target": filename}],
        llm_trace=None,
        reason=f"hand edit observed: {op.value}",
        decided_at=now,
    )
    persist_decision(decision)
    apply_decision(decision, root=root)
    return ReconcileResult(decision=decision)


__all__ = ["Outcome", "submit", "apply_decision", "persist_decision", "reconcile_file", "record_event", "RequestKind"]
