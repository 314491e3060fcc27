"""One extraction run: new turns of a session → the provider → strict validation → the policy → the inbox.

The provider is given the turns with Compozy's injected blocks already removed (so what was recalled is never
proposed again), plus a few earlier turns as context for corrections. Its answer is parsed by the one strict
parser; lines that fail become a dead letter (stage `validate`) and are never repaired. Lines that break the
what-not-to-save policy are dropped and counted. The rest are staged in one inbox file, atomically.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from compozy.config import Config
from memory.domain.extraction import (
    FailureSource,
    RunSource,
    StagedCandidate,
    Turn,
    parse_output,
    policy_violation,
    strip_injected,
)
from memory.extractor import inbox
from memory.providers import get_provider
from memory.providers.base import Provider, ProviderError
from memory.store.roots import global_root

# A turn longer than this is cut before it is sent: the provider needs what was said, not a pasted log.
MAX_TURN_CHARS = 4000
USER_ROLE = "user"


@dataclass(frozen=True)
class SessionSource:
    """What the extractor needs to know about a session."""

    session_id: str
    root_session_id: str
    workspace_id: str = ""
    agent_name: str = ""


@dataclass
class RunOutcome:
    status: Literal["completed", "failed", "dropped"]
    from_seq: int
    until_seq: int
    candidate_count: int = 0
    staged_file: str = ""
    failures: list[str] = field(default_factory=list)
    error: str = ""
    reason: str = ""
    counters: dict[str, int] = field(default_factory=dict)


def projection(turns: list[Turn]) -> list[Turn]:
    """The turns as the provider sees them: injected blocks removed, long turns cut, empty turns left out."""
    projected = []
    for turn in turns:
        text = strip_injected(turn.text).strip()
        if text:
            projected.append(Turn(turn.seq, turn.role, text[:MAX_TURN_CHARS], turn.ts))
    return projected


def _occurred_at(evidence: list[int], said: dict[int, str]) -> str | None:
    """The newest time among the evidence turns: a memory is as recent as the last thing it was read from."""
    times = [said[seq] for seq in evidence if seq in said]
    return max(times) if times else None


def extract_turns(*, source: SessionSource, turns: list[Turn], context: list[Turn], config: Config,
                  until_seq: int | None = None, deadline: float | None = None,
                  provider: Provider | None = None) -> RunOutcome:
    """Extract from `turns` (the new turns, in seq order) and stage what is found. `until_seq` is the last seq this
    run covers (it may be past the last turn given, when skipped turns were left out); `deadline` is a
    time.monotonic() value the provider call must finish by."""
    from_seq = turns[0].seq if turns else 0
    last = until_seq if until_seq is not None else (turns[-1].seq if turns else 0)
    shown = projection(turns)
    counters: dict[str, int] = {"turns": len(turns), "user_turns": sum(t.role == USER_ROLE for t in shown)}
    run = RunSource(session=source.session_id, root_session=source.root_session_id, from_seq=from_seq,
                    until_seq=last, workspace_id=source.workspace_id, agent_name=source.agent_name)

    def failure_source() -> FailureSource:
        # Built only for a dead letter: a model per turn that almost never fails was a tenth of a run's own work.
        return FailureSource(**run.model_dump())

    if counters["user_turns"] == 0:
        # Nothing the user said: no provider call, no file. Counters only (they say nothing about the text).
        return RunOutcome("dropped", from_seq, last, reason="empty_snapshot", counters=counters)

    root = global_root()
    payload: dict[str, Any] = {
        "session": {"workspace": bool(source.workspace_id), "agent": bool(source.agent_name)},
        "turns": [turn.as_payload() for turn in shown],
        "context": [turn.as_payload() for turn in projection(context)],
    }
    timeout_ms = config.memory.provider.timeout
    if deadline is not None:
        timeout_ms = min(timeout_ms, max(1, int((deadline - time.monotonic()) * 1000)))
    hint = f"{source.session_id}-{last}"
    try:
        answer = (provider or get_provider(config)).complete(task="extract", payload=payload, timeout_ms=timeout_ms)
    except ProviderError as exc:
        name = inbox.record_failure(root, stage="provider", source=failure_source(), error=str(exc), content="",
                                    name_hint=hint)
        return RunOutcome("failed", from_seq, last, failures=[name], error=str(exc), counters=counters)
    if deadline is not None and time.monotonic() > deadline:
        name = inbox.record_failure(root, stage="provider", source=failure_source(), error="the run's deadline passed",
                                    content="", name_hint=hint)
        return RunOutcome("failed", from_seq, last, failures=[name], error="deadline", counters=counters)

    parsed = parse_output(answer, input_seqs={turn.seq for turn in shown})
    outcome = RunOutcome("completed", from_seq, last, counters=counters)
    if parsed.errors:
        bad = "\n".join(error.text for error in parsed.errors)
        summary = "; ".join(f"line {e.line_number}: {e.error}" for e in parsed.errors[:5])
        outcome.failures.append(inbox.record_failure(root, stage="validate", source=failure_source(), error=summary,
                                                     content=bad, name_hint=hint))
    kept = [m for m in parsed.memories if policy_violation(m.content) is None]
    counters["invalid_lines"] = len(parsed.errors)
    counters["filtered"] = len(parsed.memories) - len(kept)
    if kept:
        said = {turn.seq: turn.ts for turn in turns if turn.ts}
        lines = [StagedCandidate(source=run, memory=memory, occurred_at=_occurred_at(memory.evidence, said)).line()
                 for memory in kept]
        try:
            staged = inbox.stage(root, session=source.session_id, until_seq=last, lines=lines)
        except OSError as exc:
            name = inbox.record_failure(root, stage="stage", source=failure_source(), error=type(exc).__name__,
                                        content="".join(line + "\n" for line in lines), name_hint=hint)
            outcome.failures.append(name)
            return RunOutcome("failed", from_seq, last, failures=outcome.failures, error=type(exc).__name__,
                              counters=counters)
        outcome.staged_file = staged.relative
    outcome.candidate_count = len(kept)
    if parsed.errors and not parsed.memories and answer.strip():
        outcome.status = "failed"
        outcome.error = "the provider's answer had no valid line"
    return outcome

