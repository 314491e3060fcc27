"""The write controller: candidate → rules → durable decision → atomic file write → reindex and MEMORY.md →
event → applied_at. Every write from every surface comes through `submit`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from compozy.config import Config, compozy_home
from memory.catalog import sql
from memory.catalog.drift import invalid_reason
from memory.catalog.queries import RootCatalogView
from memory.domain.document import (
    CONFLICT_REASON,
    Document,
    Limits,
    check_filename_type,
    parse_document,
    render_document,
)
from memory.domain.enums import EXTERNAL_ORIGINS, MUTATING_OPS, ControllerMode, Op
from memory.domain.errors import (
    DOCUMENT_ERRORS,
    STORAGE_ERRNOS,
    Conflict,
    DecisionPending,
    StorageFull,
    storage_error,
    storage_reason,
)
from memory.domain.models import Candidate, Frontmatter, Provenance, ScopeRef, format_timestamp, sha256_text, utc_now
from memory.models import Decision, HeldRoot
from memory.providers import get_provider
from memory.store import files
from memory.store.workspace import read_identity

from . import stamps
from .apply import apply_decision
from .decision_log import (
    decision_exists,
    last_decision_id,
    new_decision,
    persist_decision,
    unapplied_exist,
)
from .holds import hold_root, release_root
from .lock import write_lock
from .reconcile import reconcile_file
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
        clear_abandoned_reservation()
        replay_unapplied()
        yield


def _reservation_marker() -> Path:
    return compozy_home() / "run" / "reservation"


def reservation_abandoned() -> bool:
    """Whether a writer was killed between reserving its file and committing its decision (cheap: one stat)."""
    try:
        return _reservation_marker().stat().st_size > 0
    except FileNotFoundError:
        return False


def clear_abandoned_reservation() -> None:
    """Remove the temp file a writer killed before its decision committed left in its root: no decision names
    it, so no replay would. The caller holds the write lock, so no live writer is between reserve and commit."""
    root = files.read_marker(_reservation_marker())
    if root is None:
        return
    if root and Path(root).is_dir():
        files.remove_stale_temp_files(Path(root))
    files.remove_marker(_reservation_marker())


def replay_unapplied() -> list[str]:
    """Apply unapplied decisions in the order they were made (seq). The caller holds the write lock.

    A root whose decision cannot be applied now (a full or read-only filesystem, a workspace no longer at its
    registered path) is held: its remaining decisions wait, in order, for the next replay, and the other roots go
    on. Every process replays at start, so one full disk must not stop the home."""
    replayed: list[str] = []
    if not unapplied_exist():
        return replayed
    by_root: dict[str, list[str]] = {}
    cleaned: set[str] = set()
    roots: dict[str, Path | None] = {}
    stopped: set[str] = set()
    pending = Decision.objects.filter(applied_at__isnull=True).order_by("seq", "id")
    for decision in pending.iterator():
        ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
        if ref.root_key in stopped:
            continue
        if ref.root_key not in roots:
            roots[ref.root_key] = resolve_root(ref)
        root = roots[ref.root_key]
        if root is None:
            continue  # its workspace is not on this machine (yet); health keeps reporting it
        moved = _not_the_workspace(ref, root)
        if moved is not None:
            # Never write into a directory that is no longer this workspace's root (it moved, or another
            # workspace now lives there): the decision waits until the workspace is found again.
            hold_root(ref.root_key, workspace_id=ref.workspace_id, reason="workspace_moved", message=moved,
                      decision_id=decision.id)
            stopped.add(ref.root_key)
            continue
        if ref.root_key not in cleaned and _apply_or_hold(decision, ref, files.remove_stale_temp_files, root):
            stopped.add(ref.root_key)
            continue
        cleaned.add(ref.root_key)
        if _apply_or_hold(decision, ref, apply_decision, decision, root=root, replaying=True,
                          external=decision.origin in EXTERNAL_ORIGINS):
            stopped.add(ref.root_key)
            continue
        replayed.append(decision.id)
        by_root.setdefault(ref.root_key, []).append(decision.id)
    for root_key in roots:
        if root_key not in stopped:
            release_root(root_key, applied=by_root.get(root_key, []))
    return replayed


def _apply_or_hold(decision: Decision, ref: ScopeRef, step: Any, *args: Any,
                   **kwargs: Any) -> tuple[str, str | None] | None:
    """Run one step of applying `decision`; a storage failure (a full or read-only filesystem) holds its root and
    returns (reason, the OS's words) instead of raising. Every other error is raised."""
    try:
        step(*args, **kwargs)
    except OSError as exc:
        reason = storage_reason(exc)
        if reason is None:
            raise
        hold_root(ref.root_key, workspace_id=ref.workspace_id, reason=reason, message=str(exc),
                  decision_id=decision.id)
        return reason, exc.strerror
    return None


def _not_the_workspace(ref: ScopeRef, root: Path) -> str | None:
    """Why `root` is not the root of `ref`'s workspace any more, or None (it is, or the root is not a workspace's)."""
    if not ref.workspace_id:
        return None
    directory = root
    while directory.name != ".compozy" and directory.parent != directory:
        directory = directory.parent
    workspace_dir = directory.parent
    try:
        found = read_identity(workspace_dir).id
    except Exception:  # noqa: BLE001 - any unreadable workspace.toml means "not this workspace here"
        return f"{workspace_dir} holds no readable workspace.toml"
    if found != ref.workspace_id:
        return f"{workspace_dir} now holds workspace {found}"
    return None


def _refuse_if_held(ref: ScopeRef) -> None:
    """A new decision in a held root would land before the ones waiting there: refused, saying why."""
    # Nearly every write finds no held root: one plain statement says so (building the ORM query cost more).
    with sql.cursor() as cursor:
        cursor.execute("SELECT 1 FROM memory_held_roots WHERE root_key = %s", [ref.root_key])
        if cursor.fetchone() is None:
            return
    held = HeldRoot.objects.get(root_key=ref.root_key)
    kind = next((k for reason, k in STORAGE_ERRNOS.values() if reason == held.reason), None)
    message = (f"The memory root {ref.root_key} is held ({held.reason}: {held.message}); decision "
               f"{held.decision_id} waits for it. Nothing was decided; retry once the root can be written.")
    details = {"reason": held.reason, "root_key": ref.root_key, "decision_id": held.decision_id}
    raise (kind or Conflict)(message, details=details)


def reserve(decision: Decision, root: Path) -> Path | None:
    """Write an add's or update's file to a temp file beside its target before the decision is committed, so a
    full or read-only filesystem refuses the write while nothing is decided yet (nothing durable, nothing to
    apply later behind anyone's back). MEMORY.md's line needs room too: the root must have at least the index's
    size free beyond the file, or the write is refused the same way."""
    if decision.op not in (Op.ADD, Op.UPDATE):
        return None
    ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
    path = files.safe_path(root, decision.target_filename)
    try:
        if not root.is_dir():
            files.make_scope_dirs(root, with_inbox=ref.scope.value == "global")
        reserved = files.reserve_write(path, decision.post_content)
    except OSError as exc:
        if storage_reason(exc) is None:
            raise
        raise storage_error(exc, where=f"The memory root {ref.root_key}",
                            details={"root_key": ref.root_key}) from None
    try:
        index = root / "MEMORY.md"
        needed = (index.stat().st_size if index.exists() else 0) + 4096
        stats = os.statvfs(root)
        if stats.f_bavail * stats.f_frsize < needed:
            raise StorageFull(
                f"The memory root {ref.root_key} has under {needed} bytes free for its MEMORY.md. Nothing was "
                "decided; retry once there is room.",
                details={"reason": "disk_full", "root_key": ref.root_key, "path": str(root)})
    except BaseException:
        files.discard_reserved(reserved)
        raise
    return reserved


def persist_and_apply(decision: Decision, *, root: Path, document: Document | None = None) -> None:
    """Commit the decision (with its file already reserved), then apply it. A storage failure after the commit
    holds the root and says so (`memory.decision.pending`): the decision is durable and the next replay applies
    it once the root can be written; it is never applied later without anyone being told."""
    # Between the reserve and the commit a kill leaves a temp file that no decision names: the marker says where,
    # for the next holder of the write lock (after the commit, replay owns the root's temp files).
    files.write_marker(_reservation_marker(), str(root))
    # Before the reservation's temp file moves it: the freshness stamp follows this write from here.
    mtime_before = stamps.root_mtime(root)
    try:
        reserved = reserve(decision, root)
        try:
            persist_decision(decision)
        except BaseException:
            if reserved is not None:
                files.discard_reserved(reserved)
            raise
    finally:
        files.remove_marker(_reservation_marker())
    ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
    held = _apply_or_hold(decision, ref, apply_decision, decision, root=root, document=document, reserved=reserved,
                          mtime_before=mtime_before)
    if held:
        reason, strerror = held
        raise DecisionPending(
            f"Decision {decision.id} is recorded, but {decision.target_filename} could not be written "
            f"({strerror or reason}). It will be applied when {ref.root_key} can be written again "
            "(the next command or the server's periodic replay); `compozy memory health` shows the root as held.",
            details={"decision_id": decision.id, "root_key": ref.root_key, "reason": reason,
                     "filename": decision.target_filename},
        ) from None


def submit(candidate: Candidate, *, root: Path, config: Config, dry_run: bool = False, once: bool = False,
           resolution: str | None = None) -> Outcome:
    """The decision for the candidate, applied unless `dry_run`. A `reject` is returned like any other decision
    (it is logged and its event recorded); the service layer turns it into the Rejected error.

    `once`: a candidate already decided in this root gets its earlier decision back, whatever changed since.
    The extractor's drain replays a staged file after a crash or from the dead letters; its candidates must not
    be decided a second time against the state their own earlier decisions produced.

    `resolution`: the candidate resolves a merge conflict in its target (`memory resolve`; the value names how,
    such as "keep ours"): the conflicted file is replaced whatever it was, an operator's decision on a named file."""
    candidate_hash = candidate.candidate_hash()
    with exclusive(config):
        if not dry_run:
            _refuse_if_held(candidate.ref)
        earlier = earliest_decision(candidate, candidate_hash) if once else None
        if earlier is not None:
            return Outcome(earlier, applied=False, dry_run=dry_run)
        # With `once`, no decision of this candidate exists in its root (the look-up above found none). Every
        # decision with this candidate hash is in this root (the hash covers the scope), and the idempotency key
        # covers the hash, so neither the previous decision nor a stored decision with the same key can exist:
        # both look-ups are skipped (the extractor's drain asks once per candidate).
        may_be_decided = not once
        target = candidate.target_filename or ""
        if target:
            # A hand edit of the target since the last reindex is recorded first, so prior_content is true.
            limits = Limits(config.memory.file.max_lines, config.memory.file.max_bytes)
            invalid = (invalid_reason(root, target, limits) if dry_run
                       else reconcile_file(candidate.ref, root, target, limits).invalid_reason)
            # `resolution`: the operator's resolution of a merge conflict replaces the conflicted file (which
            # becomes the decision's prior content, so nothing is lost); any other invalid file is never overwritten.
            if invalid and not (resolution and invalid == CONFLICT_REASON):
                raise Conflict(
                    f"{target} on disk is not a valid memory file ({invalid}); it is never overwritten. "
                    "Fix or remove it by hand, then retry.",
                    details={"filename": target, "reason": invalid},
                )
        previous = previous_decision(candidate, root, candidate_hash=candidate_hash) if may_be_decided else None
        if previous is not None:
            return Outcome(previous, applied=False, dry_run=dry_run)
        view = RootCatalogView(candidate.ref.root_key)
        verdict = decide(candidate, view, rule_settings(config))
        if resolution and verdict.op is not Op.REJECT:
            verdict = resolution_verdict(verdict, target, resolution, exists=view.by_filename(target) is not None)
        decision = build_decision(candidate, verdict, root=root, candidate_hash=candidate_hash)
        if dry_run:
            return Outcome(decision, applied=False, dry_run=True)
        if may_be_decided and decision_exists(decision.idempotency_key):
            stored = Decision.objects.get(idempotency_key=decision.idempotency_key)
            return Outcome(stored, applied=False, dry_run=False)
        document = Document(Frontmatter.model_validate(decision.frontmatter), candidate.body) \
            if decision.op in (Op.ADD, Op.UPDATE) else None
        persist_and_apply(decision, root=root, document=document)
        return Outcome(decision, applied=decision.op in MUTATING_OPS, dry_run=False)


def resolution_verdict(verdict: Verdict, target: str, resolution: str, *, exists: bool) -> Verdict:
    """A resolution writes its target even when the rules saw nothing to do: the catalog holds the previous
    version, so keeping the side that equals it is an exact duplicate to the rules, yet the file on disk still
    holds the conflict. The scan still applies (a reject stands)."""
    trace = [*verdict.rule_trace, {"name": "conflict_resolution", "passed": True,
                                   "reason": f"the operator resolved the conflict: {resolution}", "target": target}]
    op = Op.UPDATE if exists else Op.ADD
    return Verdict(op, target, [target] if exists else [], trace, f"conflict resolved: {resolution}", 1.0)


def _decision_of(candidate: Candidate, *, newest: bool, candidate_hash: str | None = None) -> Decision | None:
    """The candidate's first or last decision in its root. The id first, in plain SQL: nearly every candidate is
    new, and building an ORM query cost more than running it (the drain asks once per extracted candidate).
    `candidate_hash`: the candidate's, when the caller has it already."""
    order = "seq DESC" if newest else "seq"
    with sql.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM memory_decisions WHERE candidate_hash = %s AND root_key = %s ORDER BY {order} LIMIT 1",
            [candidate_hash or candidate.candidate_hash(), candidate.ref.root_key],
        )
        found = cursor.fetchone()
    return None if found is None else Decision.objects.get(id=found[0])


def earliest_decision(candidate: Candidate, candidate_hash: str | None = None) -> Decision | None:
    return _decision_of(candidate, newest=False, candidate_hash=candidate_hash)


def previous_decision(candidate: Candidate, root: Path, *, candidate_hash: str | None = None) -> Decision | None:
    """The stored decision for this candidate, if nothing in its root has changed since it was made."""
    previous = _decision_of(candidate, newest=True, candidate_hash=candidate_hash)
    if previous is None:
        return None
    changed_since = Decision.objects.filter(
        root_key=previous.root_key, seq__gt=previous.seq, op__in=[op.value for op in MUTATING_OPS]
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


def build_decision(candidate: Candidate, verdict: Verdict, *, root: Path, now: datetime | None = None,
                   candidate_hash: str | None = None) -> Decision:
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
        # Every write path ends here: no decision may write a memory whose filename names another type.
        check_filename_type(verdict.target_filename, front.type.value)
        frontmatter = front.yaml_dict()
        post_content = render_document(front, candidate.body)
    elif verdict.op == Op.NOOP and candidate.frontmatter is not None:
        frontmatter = candidate.frontmatter.yaml_dict()
    return new_decision(
        ref=ref, origin=candidate.origin, op=verdict.op, candidate_hash=candidate_hash or candidate.candidate_hash(),
        targets=verdict.targets, target_filename=verdict.target_filename, frontmatter=frontmatter,
        post_content=post_content, prior_content=prior_text, rule_trace=verdict.rule_trace, reason=verdict.reason,
        # The state it was decided against (the target's last decision), so the same candidate after, say, a
        # delete is a new decision rather than a replay of the old one.
        base_state=last_decision_id(ref.root_key, verdict.target_filename),
        decided_at=now, confidence=verdict.confidence, source=verdict.source, llm_trace=verdict.llm_trace,
        session_id=candidate.session_id or "", reverts=candidate.revert_of,
    )


def stamp_provenance(candidate: Candidate, prior_text: str | None, now: datetime) -> Frontmatter:
    """The controller owns provenance timestamps and the source-session list; callers cannot forge them."""
    front = candidate.frontmatter
    assert front is not None
    given = front.provenance or Provenance()
    stamped = candidate.occurred_at or format_timestamp(now)
    created_at = candidate.said_at or stamped
    sessions = list(given.source_sessions)
    if prior_text is not None:
        try:
            prior = parse_document(prior_text).frontmatter.provenance
        except DOCUMENT_ERRORS:
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
            "updated_at": stamped,
        }
    )
    return front.model_copy(update={"provenance": provenance})


