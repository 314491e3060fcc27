"""The checkpoint noun: the workspace's `project_checkpoint_summary.md`, updated from a session's transcript.

Two callers: the task cluster after an eligible session stops (`checkpoint_after_stop`), and pressure compaction
(`checkpoint_update` with a span of the session). Either way the active provider gets the previous checkpoint and
a bounded projection; its answer is checked for shape, size and raw claim tokens, then written through the
controller with origin `provider`, so it is a decision like any other (listed, shown, reverted). A generation that
fails any check leaves the file byte-identical and leaves a failure event and a `_system/` record instead.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from memory.controller.artifacts import CHECKPOINT_DIR, write_artifact
from memory.controller.core import exclusive, submit
from memory.controller.events import event_record
from memory.controller.rules import scan_rejections
from memory.domain import checkpoint
from memory.domain.document import normalize_body, parse_document
from memory.domain.enums import (
    CHECKPOINT_TYPES,
    EventOp,
    MemoryType,
    Op,
    Origin,
    RequestKind,
    Scope,
    SessionType,
)
from memory.domain.errors import DOCUMENT_ERRORS
from memory.domain.models import Candidate, Frontmatter, Provenance, ScopeRef, sha256_text, utc_now
from memory.domain.scanner import scan
from memory.models import Session
from memory.providers import get_provider
from memory.providers.base import ProviderError
from memory.sessions import ledger
from memory.store import files

from .inputs import Caller, Selector
from .resolution import Resolved, resolve
from .results import DecisionSummary, Result, decision_summary

Source = Literal["session_stop", "compaction"]
FAILURES_DIR = f"{CHECKPOINT_DIR}/failures"
# A generation is re-made at most this often when another writer changed the checkpoint meanwhile.
MAX_REBASES = 3


class CheckpointFailure(Result):
    stage: str  # provider, validate, controller
    reason: str
    record: str | None


class CheckpointOutcome(Result):
    """What one checkpoint update did. `reason`: updated, unchanged, no_messages, ineligible, no_workspace, failed."""

    session_id: str
    source: str
    updated: bool
    reason: str
    decision: DecisionSummary | None
    messages: int
    failure: CheckpointFailure | None
    detail: str | None = None


def ineligible_reason(session: Session) -> str | None:
    """Why a session never feeds the workspace checkpoint, or None: sub-agents work inside their parent's
    session, and `system` sessions are the machine's own work (the summariser's included)."""
    if session.parent_session_id:
        return "subagent"
    if SessionType(session.type) not in CHECKPOINT_TYPES:
        return f"type_{session.type}"
    if not session.workspace_id:
        return "no_workspace"
    return None


def _workspace_ref(resolved: Resolved) -> ScopeRef:
    return ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)


def _current(resolved: Resolved) -> tuple[str, str]:
    """(raw text hash, body) of the checkpoint now on disk; ("", "") when there is none or it does not parse."""
    raw = files.read_bytes(resolved.root(_workspace_ref(resolved)), checkpoint.CHECKPOINT_FILENAME)
    if raw is None:
        return "", ""
    text = raw.decode("utf-8", "replace")
    try:
        return sha256_text(text), parse_document(text).body
    except DOCUMENT_ERRORS:
        return sha256_text(text), ""


def _candidate(resolved: Resolved, body: str, session_id: str) -> Candidate:
    front = Frontmatter(name=checkpoint.CHECKPOINT_NAME, description=checkpoint.CHECKPOINT_DESCRIPTION,
                        type=MemoryType.PROJECT, scope=Scope.WORKSPACE,
                        provenance=Provenance(source_actor=Origin.PROVIDER))
    return Candidate(ref=_workspace_ref(resolved), origin=Origin.PROVIDER, kind=RequestKind.WRITE, frontmatter=front,
                     body=body, target_filename=checkpoint.CHECKPOINT_FILENAME, named_target=True,
                     session_id=session_id)


@dataclass
class _Failed(Exception):
    stage: str
    reason: str
    content: str = ""


def _directory_names(resolved: Resolved) -> list[str]:
    if resolved.workspace is None:
        return []
    directory = str(resolved.workspace.directory)
    return list(dict.fromkeys([directory, os.path.realpath(directory)]))


def _generate(resolved: Resolved, previous: str, projection: ledger.Projection, session: Session,
              source: Source) -> str:
    config = resolved.config
    limits = {"max_bytes": config.memory.file.max_bytes, "max_lines": config.memory.file.max_lines}
    payload: dict[str, Any] = {
        "previous": previous, **projection.payload(), "limits": limits, "source": source,
        "sections": [heading for _key, heading, _cap in checkpoint.SECTIONS],
        # The workspace's directory, as given and resolved (a transcript may use either): the checkpoint names files
        # relative to it and leaves out files outside it.
        "session": {"id": session.session_id, "type": session.type, "agent": session.agent_name,
                    "workspace_dirs": _directory_names(resolved)},
    }
    try:
        text = get_provider(config).complete(task="checkpoint", payload=payload,
                                             timeout_ms=config.memory.provider.timeout)
    except ProviderError:
        raise _Failed("provider", "provider_error") from None
    if not isinstance(text, str):
        raise _Failed("validate", "not_text")
    body = normalize_body(text)
    problem = checkpoint.shape_problem(body, **limits)
    if problem is not None:
        raise _Failed("validate", problem, body)
    found = scan(body)
    if "scan.claim_token" in found.rejected_rules:
        raise _Failed("validate", "claim_token", body)
    if not found.clean:
        raise _Failed("validate", "scan:" + ",".join(found.rejected_rules), body)
    return body


def _record_failure(resolved: Resolved, session: Session, source: Source, failure: _Failed) -> CheckpointFailure:
    now = utc_now()
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    safe_session = re.sub(r"[^A-Za-z0-9_.-]+", "_", session.session_id)[:80]
    record = {
        "stage": failure.stage, "source": source, "error": failure.reason, "session_id": session.session_id,
        # The generated text is never kept: it failed because it may hold what must not be stored.
        "content_sha256": sha256_text(failure.content) if failure.content else None,
        "content_bytes": len(failure.content.encode("utf-8")),
        "recorded_at": now.isoformat().replace("+00:00", "Z"),
    }
    # Artifact names are lowercase plain names.
    relative = f"{FAILURES_DIR}/{stamp}-{safe_session}-{source}.json".lower()
    path = write_artifact(resolved.root(_workspace_ref(resolved)), relative,
                          json.dumps(record, indent=2, sort_keys=True) + "\n")
    event_record(op=EventOp.SESSION_CHECKPOINT_FAILED, scope=Scope.WORKSPACE.value, workspace_id=session.workspace_id,
                 session_id=session.session_id, actor=Origin.PROVIDER.value, target=checkpoint.CHECKPOINT_FILENAME,
                 metadata={"stage": failure.stage, "reason": failure.reason, "source": source,
                           "record": relative})
    return CheckpointFailure(stage=failure.stage, reason=failure.reason, record=str(path))


def checkpoint_update(*, session: Session, resolved: Resolved, projection: ledger.Projection,
                      source: Source) -> CheckpointOutcome:
    """Merge one projection of `session` into the workspace checkpoint through the controller."""

    def outcome(reason: str, *, decision: DecisionSummary | None = None, updated: bool = False,
                failure: CheckpointFailure | None = None) -> CheckpointOutcome:
        return CheckpointOutcome(session_id=session.session_id, source=source, updated=updated, reason=reason,
                                 decision=decision, messages=len(projection.messages), failure=failure)

    if resolved.workspace is None:
        return outcome("no_workspace")
    if not projection.messages:
        return outcome("no_messages")
    for _attempt in range(MAX_REBASES):
        based_on, previous = _current(resolved)
        try:
            body = _generate(resolved, previous, projection, session, source)
        except _Failed as failed:
            return outcome("failed", failure=_record_failure(resolved, session, source, failed))
        with exclusive(resolved.config):
            if _current(resolved)[0] != based_on:
                continue  # another update landed while this one was generated: merge over it instead
            written = submit(_candidate(resolved, body, session.session_id),
                             root=resolved.root(_workspace_ref(resolved)), config=resolved.config)
        if written.decision.op == Op.REJECT:
            # The scan above runs the same rules, so this is a belt to its braces; the reject is logged either way.
            failure = _Failed("controller", "rejected:" + ",".join(scan_rejections(written.decision.rule_trace)), body)
            return outcome("failed", failure=_record_failure(resolved, session, source, failure))
        summary = DecisionSummary(**decision_summary(written.decision))
        if not written.applied:
            return outcome("unchanged", decision=summary)
        event_record(op=EventOp.SESSION_CHECKPOINT_UPDATED, scope=Scope.WORKSPACE.value,
                     workspace_id=session.workspace_id, session_id=session.session_id,
                     actor=Origin.PROVIDER.value, decision_id=written.decision.id,
                     target=checkpoint.CHECKPOINT_FILENAME,
                     metadata={"source": source, "messages": len(projection.messages),
                               "omitted_older_messages": projection.omitted_messages})
        return outcome("updated", decision=summary, updated=True)
    failure = _Failed("controller", "concurrent_updates")
    return outcome("failed", failure=_record_failure(resolved, session, source, failure))


def session_resolved(session: Session) -> Resolved:
    """The workspace a session ran in, resolved by its ULID (background work has no cwd)."""
    return resolve(Selector(workspace=session.workspace_id or None), Caller(origin=Origin.PROVIDER))


def checkpoint_after_stop(*, session_id: str) -> CheckpointOutcome:
    """The task cluster's job once an eligible session stops: its unarchived transcript into the checkpoint."""
    session = Session.objects.get(session_id=session_id)
    reason = ineligible_reason(session)
    if reason is not None:
        return CheckpointOutcome(session_id=session_id, source="session_stop", updated=False, reason="ineligible",
                                 decision=None, messages=0, failure=None, detail=reason)
    resolved = session_resolved(session)
    limits = resolved.config.session.projection
    projection = ledger.projection(session_id, max_messages=limits.max_messages, max_bytes=limits.max_bytes)
    return checkpoint_update(session=session, resolved=resolved, projection=projection, source="session_stop")


def checkpoint_queue(*, session_id: str) -> None:
    """Hand the update to the task cluster (inline when it runs synchronously, as in tests)."""
    from django_q.tasks import async_task

    async_task("memory.background.tasks.run_checkpoint", session_id, task_name=f"checkpoint-{session_id}"[:100])
