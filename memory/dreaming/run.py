"""A dreaming attempt: the gates in order, then (when they all pass) a run.

The run's steps, each timed:
1. candidates: the chosen signals and their bounded snippets, saved on the `memory_consolidations` row
2. artifact: `_system/dreaming/<YYYYMMDD>-<run>.md`, the candidates and why each was chosen
3. synthesis: the active provider's body for "Dreaming synthesis <date>" (see synthesis.py)
4. submit: one `project` candidate through the controller, origin `dreaming`; the candidate's hash is saved on
   the row first, so start-up recovery can find the decision if this process dies
5. stamp: only after an `add` or `update` decision is durable, in one transaction with the row's completion and
   the `memory.dream.run.promoted` event: the candidates' signals get `promoted_at` and the run's id

Any failure releases the lock, marks the row `failed` with the step and error, writes
`_system/dreaming/failures/<run>.json`, records `memory.dream.run.failed`, and stamps nothing.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from ulid import ULID

from compozy.config import Config
from memory.controller import faults
from memory.controller.artifacts import DREAMING_DIR, FAILURES_DIR, write_artifact
from memory.controller.core import submit
from memory.controller.events import event_record
from memory.controller.rules import scan_rejections
from memory.domain.document import render_document
from memory.domain.dreaming import Gate, RunStatus, RunStep
from memory.domain.enums import EventOp, MemoryType, Op, Origin, RequestKind, Scope
from memory.domain.errors import CompozyError, Rejected
from memory.domain.models import Candidate, Frontmatter, Provenance, ScopeRef, format_timestamp, utc_now
from memory.domain.names import memory_filename
from memory.models import Consolidation, Decision
from memory.store import files

from . import gates as g
from .candidates import DreamCandidate, candidate_bodies, select_candidates
from .contradictions import consolidate
from .lock import Acquired, LockState, acquire, current_owner, release, still_held
from .synthesis import bounded_snippet, safe_name, synthesis_name, synthesize

_log = logging.getLogger("compozy.memory.dreaming")


def new_run_id() -> str:
    return "drm_" + str(ULID()).lower()


def workspace_ref(workspace_id: str) -> ScopeRef:
    return ScopeRef(scope=Scope.WORKSPACE, workspace_id=workspace_id)


@dataclass
class Attempt:
    """What a trigger answers: whether a run started, the gate that blocked it (None when it ran), and the run."""

    triggered: bool
    reason: Gate | None
    detail: str
    run: Consolidation | None = None
    checks: list[g.GateCheck] = field(default_factory=list)


def _blocked(check: g.GateCheck, checks: list[g.GateCheck]) -> Attempt:
    detail = check.detail + (f"; waiting for {check.waiting_for}" if check.waiting_for else "")
    return Attempt(False, check.gate, detail, None, checks)


def gate_json(check: g.GateCheck) -> dict[str, Any]:
    return {"gate": check.gate.value, "passed": check.passed, "skipped": check.skipped, "detail": check.detail,
            "waiting_for": check.waiting_for}


def attempt(*, workspace_id: str, root: Path, config: Config, trigger: str, actor: str, force: bool = False,
            retry_of: str | None = None, now: datetime | None = None) -> Attempt:
    """Check the gates cheapest first; when all pass, run while holding the workspace's lock."""
    started = time.monotonic()
    now = now or utc_now()
    dream = config.memory.dream
    checks: list[g.GateCheck] = []

    def passes(check: g.GateCheck) -> bool:
        checks.append(check)
        return check.passed

    if not passes(g.check_enabled(dream)):
        return _blocked(checks[-1], checks)
    last = g.last_success(workspace_id)
    if not passes(g.check_time(dream, last, now, force=force)):
        return _blocked(checks[-1], checks)
    if not passes(g.check_sessions(dream, g.sessions_since(workspace_id, last), force=force)):
        return _blocked(checks[-1], checks)
    run_id, owner = new_run_id(), current_owner()
    taken = acquire(workspace_id, owner=owner, run_id=run_id, ttl_ms=dream.lock_stale_after, now=now)
    if not passes(_lock_check(taken, now)):
        return _blocked(checks[-1], checks)
    try:
        if taken.taken_over is not None:
            _record_takeover(workspace_id, taken.taken_over, run_id, actor)
        selection = select_candidates(workspace_id, dream, now=now)
        if not passes(g.check_signal(dream, selection)):
            release(workspace_id, owner)
            return _blocked(checks[-1], checks)
        run = Consolidation.objects.create(
            id=run_id, workspace_id=workspace_id, status=RunStatus.RUNNING.value, trigger=trigger, actor=actor,
            forced=force, retry_of=retry_of, owner=owner, gates=[gate_json(c) for c in checks],
            eligible=selection.eligible, candidates=[c.as_json() for c in selection.chosen],
            timings={"gates_ms": _ms(started)}, started_at=now,
        )
        event_record(op=EventOp.DREAM_STARTED, workspace_id=workspace_id, actor=actor,
                     metadata={"run": run_id, "trigger": trigger, "forced": force, "candidates": len(selection.chosen),
                               "eligible": selection.eligible, **({"retry_of": retry_of} if retry_of else {})})
    except BaseException:
        release(workspace_id, owner)
        raise
    execute(run, selection.chosen, root=root, config=config)
    return Attempt(True, None, f"run {run_id} {run.status}", run, checks)


def _lock_check(taken: Acquired, now: datetime) -> g.GateCheck:
    if not taken.acquired:
        return g.check_lock(taken.state, now)
    if taken.taken_over is not None:
        return g.GateCheck(Gate.LOCK, True, f"took over the stale lock of run {taken.taken_over.run_id}")
    return g.GateCheck(Gate.LOCK, True, "lock acquired")


def _record_takeover(workspace_id: str, stale: LockState, run_id: str, actor: str) -> None:
    """The run that held a stale lock is over: it is marked failed (if its row still says running) and the
    takeover is recorded as that run's failure."""
    error = {"code": "memory.dream.stale_lock", "message": f"its lock went stale and run {run_id} took it over",
             "step": ""}
    Consolidation.objects.filter(id=stale.run_id, status=RunStatus.RUNNING.value).update(
        status=RunStatus.FAILED.value, error=error, finished_at=utc_now())
    event_record(op=EventOp.DREAM_FAILED, workspace_id=workspace_id, actor=actor,
                 metadata={"run": stale.run_id, "reason": "stale_lock", "taken_over_by": run_id,
                           "lock_expired_at": format_timestamp(stale.expires_at) if stale.expires_at else None})


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 2)


def _step(run: Consolidation, step: RunStep) -> None:
    run.step = step.value
    # Saved as it goes: a status shows where a running run is, and recovery says where a dead one stopped.
    Consolidation.objects.filter(id=run.id).update(step=step.value)
    # Test-only hooks (memory.controller.faults): die, pause for an outside SIGKILL, or raise at this boundary.
    faults.hit(f"dream_{step.value}")
    faults.fail(f"dream_{step.value}")


def artifact_name(run: Consolidation) -> str:
    return f"{DREAMING_DIR}/{run.started_at:%Y%m%d}-{run.id}.md"


def execute(run: Consolidation, chosen: list[DreamCandidate], *, root: Path, config: Config) -> Consolidation:
    timings: dict[str, float] = dict(run.timings)
    total = time.monotonic()
    step = RunStep.CANDIDATES
    try:
        clock = time.monotonic()
        _step(run, step)
        bodies = candidate_bodies(chosen)
        limit = config.memory.dream.snippet_chars
        run.candidates = [c.as_json(snippet=bounded_snippet(bodies.get(c.entry_id, ""), limit)) | {
            "name": safe_name(c.name, c.filename)} for c in chosen]
        timings["candidates_ms"] = _ms(clock)

        step = RunStep.ARTIFACT
        clock = time.monotonic()
        _step(run, step)
        run.artifact = artifact_name(run)
        write_artifact(root, run.artifact, render_artifact(run, config))
        timings["artifact_ms"] = _ms(clock)

        step = RunStep.SYNTHESIS
        clock = time.monotonic()
        _step(run, step)
        date = f"{run.started_at:%Y-%m-%d}"
        filename = memory_filename(MemoryType.PROJECT, synthesis_name(date))
        existing = files.read_bytes(root, filename) is not None
        included = _same_day_union(run, filename) if existing else run.candidates
        synthesis = synthesize(date=date, run_id=run.id, candidates=included, config=config)
        run.synthesis = synthesis.trace()
        run.synthesis_filename = filename
        timings["synthesis_ms"] = _ms(clock)

        step = RunStep.SUBMIT
        clock = time.monotonic()
        _step(run, step)
        ref = workspace_ref(run.workspace_id)
        front = Frontmatter(name=synthesis.name, description=synthesis.description, type=MemoryType.PROJECT,
                            scope=Scope.WORKSPACE, provenance=Provenance(source_actor=Origin.DREAMING))
        # The same-day synthesis, when there is one, is named: a merge is an update of it, never a collision.
        candidate = Candidate(ref=ref, origin=Origin.DREAMING, kind=RequestKind.WRITE, frontmatter=front,
                              body=synthesis.body, target_filename=filename, named_target=existing)
        run.candidate_hash = candidate.candidate_hash()
        run.timings = timings
        run.save()  # before submitting: recovery finds the decision by this hash if the process dies now
        try:
            decision = submit(candidate, root=root, config=config).decision
        except CompozyError:
            stored = _decision_of(run)
            if stored is not None:
                run.decision_id, run.decision_op = stored.id, stored.op
            raise
        run.decision_id, run.decision_op = decision.id, decision.op
        if decision.op == Op.REJECT:
            rules = scan_rejections(decision.rule_trace)
            raise Rejected("The content scanner rejected the synthesis: " + ", ".join(rules) + ".",
                           details={"decision_id": decision.id, "rules": rules})
        timings["submit_ms"] = _ms(clock)

        # Memories stating one fact at two times: the older statement's delete is proposed through the
        # controller, after the synthesis (a failure here is the run's failure, recorded like any other step's).
        clock = time.monotonic()
        run.synthesis = {**(run.synthesis or {}), "contradictions": consolidate(ref=ref, root=root, config=config)}
        timings["contradictions_ms"] = _ms(clock)

        step = RunStep.STAMP
        clock = time.monotonic()
        _step(run, step)
        timings["stamp_ms"] = _ms(clock)
        timings["run_ms"] = _ms(total)
        run.timings = timings
        finish(run, Op(decision.op), actor=run.actor)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded on the run; none escapes half-done
        timings["run_ms"] = _ms(total)
        run.timings = timings
        if not isinstance(exc, CompozyError):
            _log.exception("dreaming run %s failed at %s", run.id, step.value)
        fail(run, step, exc, root=root)
    finally:
        release(run.workspace_id, run.owner)
    return run


def _same_day_union(run: Consolidation, filename: str) -> list[dict[str, Any]]:
    """Today's synthesis exists: the new one keeps the candidates of today's earlier promoted runs (a merge is
    an update), this run's entries replacing theirs for the same memory."""
    earlier = (Consolidation.objects.filter(workspace_id=run.workspace_id, synthesis_filename=filename,
                                            status=RunStatus.COMPLETED.value, decision_op__in=[Op.ADD, Op.UPDATE])
               .exclude(id=run.id).order_by("started_at"))
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for previous in earlier:
        for item in previous.candidates:
            merged[(item["root_key"], item["filename"])] = item
    for item in run.candidates:
        merged.pop((item["root_key"], item["filename"]), None)
    mine = list(run.candidates)
    return mine + sorted(merged.values(), key=lambda c: (-c["score"], c["root_key"], c["filename"]))


def _decision_of(run: Consolidation) -> Decision | None:
    if not run.candidate_hash:
        return None
    return (Decision.objects.filter(candidate_hash=run.candidate_hash,
                                    root_key=workspace_ref(run.workspace_id).root_key,
                                    decided_at__gte=run.started_at)
            .order_by("-seq", "-id").first())


class LockLost(Exception):
    """The run's lock was taken over as stale while it ran; it stamps nothing."""


def finish(run: Consolidation, op: Op, *, actor: str, recovered: bool = False) -> None:
    """Complete a run whose decision is durable: stamp the signals (add/update only), mark the row completed and
    record the promotion, in one transaction, and only while the run still holds its lock."""
    now = utc_now()
    with transaction.atomic():
        if not recovered and not still_held(run.workspace_id, run.owner):
            raise LockLost(f"the lock of run {run.id} was taken over while it ran")
        promoted = 0
        if op in (Op.ADD, Op.UPDATE):
            promoted = stamp_signals(run, now)
        run.status = RunStatus.COMPLETED.value
        run.promoted = promoted
        run.recovered = recovered
        run.finished_at = now
        run.error = None
        run.save()
        if op in (Op.ADD, Op.UPDATE):
            event_record(op=EventOp.DREAM_PROMOTED, workspace_id=run.workspace_id, actor=actor,
                         decision_id=None, target=run.synthesis_filename,
                         metadata={"run": run.id, "decision": run.decision_id, "decision_op": op.value,
                                   "promoted": promoted, "recovered": recovered})


def stamp_signals(run: Consolidation, now: datetime) -> int:
    stamp = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.executemany(
            "UPDATE memory_recall_signals SET promoted_at = %s, promoted_run = %s "
            "WHERE root_key = %s AND filename = %s AND promoted_at IS NULL",
            [[stamp, run.id, item["root_key"], item["filename"]] for item in run.candidates],
        )
        cursor.execute("SELECT COUNT(*) FROM memory_recall_signals WHERE promoted_run = %s", [run.id])
        return int(cursor.fetchone()[0])


def fail(run: Consolidation, step: RunStep | None, exc: BaseException | str, *, root: Path | None,
         status: RunStatus | None = None) -> None:
    """Record a failed (or, when its lock was lost, canceled) run: row, failure record, event. Stamps nothing."""
    if isinstance(exc, CompozyError):
        error = exc.to_dict()
    elif isinstance(exc, str):
        error = {"code": "memory.dream.interrupted", "message": exc, "details": {}}
    elif isinstance(exc, LockLost):
        error = {"code": "memory.dream.lock_lost", "message": str(exc), "details": {}}
    else:
        error = {"code": "memory.internal", "message": f"{type(exc).__name__}: {exc}", "details": {}}
    error["step"] = step.value if step else ""
    status = status or (RunStatus.CANCELED if isinstance(exc, LockLost) else RunStatus.FAILED)
    now = utc_now()
    if root is not None:
        record = {"run": run.id, "workspace_id": run.workspace_id, "status": status.value, "step": error["step"],
                  "error": error, "decision_id": run.decision_id, "candidates": [c["filename"] for c in run.candidates],
                  "started_at": format_timestamp(run.started_at), "recorded_at": format_timestamp(now)}
        try:
            write_artifact(root, f"{FAILURES_DIR}/{run.id}.json", json.dumps(record, indent=2) + "\n")
        except Exception:  # noqa: BLE001 - a failure record that cannot be written must not hide the failure
            _log.exception("could not write the failure record of dreaming run %s", run.id)
    run.status = status.value
    run.error = error
    run.finished_at = now
    run.save()
    event_record(op=EventOp.DREAM_FAILED, workspace_id=run.workspace_id, actor=run.actor,
                 metadata={"run": run.id, "status": status.value, "step": error["step"], "code": error["code"],
                           "decision": run.decision_id})


def render_artifact(run: Consolidation, config: Config) -> str:
    """The run's report: when and why it ran, and each candidate with its score and why it was chosen.

    It is a valid `_system/` document (frontmatter included), so an operator's `reindex --include-system` can
    index it for explicit browsing like any system artifact and health never reports it as broken; nothing else
    indexes it, and `_system/` never reaches a snapshot or a search without include_system."""
    gates = config.memory.dream.gates
    stamp = format_timestamp(run.started_at)
    front = Frontmatter(name=f"Dreaming run {run.id}", description=f"The candidates of dreaming run {run.id} and "
                        "why each was chosen", type=MemoryType.PROJECT, scope=Scope.WORKSPACE,
                        provenance=Provenance(source_actor=Origin.DREAMING, created_at=stamp, updated_at=stamp))
    lines = [
        f"- workspace: {run.workspace_id}",
        f"- started: {format_timestamp(run.started_at)}",
        f"- trigger: {run.trigger}{' (forced)' if run.forced else ''}"
        + (f", retry of {run.retry_of}" if run.retry_of else ""),
        f"- chosen: {len(run.candidates)} of {run.eligible} eligible (at most {config.memory.dream.max_candidates})",
        "",
        "## Gates",
        "",
    ]
    for check in run.gates:
        state = "skipped (forced)" if check["skipped"] else "passed" if check["passed"] else "blocked"
        lines.append(f"- {check['gate']}: {state}; {check['detail']}")
    lines += [
        "",
        "## Candidates",
        "",
        f"Each was recalled at least {gates.min_recall_count} times, was not promoted before, and scored at least "
        f"{gates.min_score:g}: score = 0.30 frequency + 0.35 relevance + 0.20 recency + 0.15 freshness.",
        "",
        "| # | memory | file | scope | score | frequency | relevance | recency | freshness | recalls | last recalled |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, c in enumerate(run.candidates, start=1):
        p = c["parts"]
        scope = c["scope"] if not c.get("agent_name") else f"agent {c['agent_name']}"
        lines.append(f"| {index} | {_cell(c['name'])} | `{c['filename']}` | {scope} | {c['score']:.3f} | "
                     f"{p['frequency']:.2f} | {p['relevance']:.2f} | {p['recency']:.2f} | {p['freshness']:.2f} | "
                     f"{c['recall_count']} | {c['last_recalled_at']} |")
    return render_document(front, "\n".join(lines))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")

