"""The hook noun: agent runtimes driving the session ledger through their own hook events. Claude Code first.

`compozy hook claude-code <event>` reads the hook's JSON from stdin (fields documented in the Claude Code hooks
reference: `session_id`, `transcript_path`, `cwd`, `hook_event_name`, `source`, `trigger`, `reason`) and:

- `SessionStart`: starts (or looks up) the ledger session and answers with its frozen memory section as
  `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": …}}`, the output the reference
  documents for SessionStart; after a compaction or a resume (`source` compact or resume) the workspace checkpoint
  as it is now follows the frozen section, so the compacted context gets the checkpoint PreCompact just wrote
- `UserPromptSubmit`, `Stop`: imports the transcript lines not yet imported (a line's uuid is its key, so a repeat
  is a no-op); `Stop` also closes the turn with a `done` row once the transcript holds the turn's reply (a line
  the client flushes after Stop is imported by the next hook, and the turn closed then, in transcript order)
- `PreCompact`: imports, then runs compaction coverage over the complete turns imported
- `SessionEnd`: imports, closes the turn, and stops the session, which queues the checkpoint update

The transcript mapping is in `memory.sessions.claude_code`. Failures are the command's to swallow and log: here
they are ordinary domain errors.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from compozy.config import get_config
from memory.controller.events import event_record
from memory.domain import jsondepth
from memory.domain.enums import EventOp
from memory.domain.errors import CompozyError, ValidationError
from memory.sessions import claude_code, ledger
from memory.store import files

from .hooklog import LINE_INVALID, log_failure
from .inputs import Caller, Input
from .results import Result
from .sessions import (
    MAX_BATCH,
    SESSION_ID_PATTERN,
    CompactionResult,
    EventInput,
    SessionAppendInput,
    SessionCompactInput,
    SessionIdInput,
    SessionStartInput,
    session_append,
    session_compact,
    session_context_after_compaction,
    session_start,
    session_stop,
)

CLAUDE_CODE_AGENT = "claude-code"
ClaudeCodeEvent = Literal["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"]
CLAUDE_CODE_EVENTS: tuple[str, ...] = ClaudeCodeEvent.__args__  # type: ignore[attr-defined]
# Stop closes the turn once the transcript holds its reply (the client may flush that line after Stop ran);
# SessionEnd closes it whatever the transcript holds, since nothing is imported after it.
# SessionStart sources after which the client's context was rebuilt from a summary: the frozen section alone would
# hand back the checkpoint of the session's start, not the one PreCompact just wrote.
CONTEXT_REBUILT = ("compact", "resume")
CLOSES_TURN = {"Stop": "answered", "SessionEnd": "always"}


class HookFailure(CompozyError):
    """A hook that cannot run: its stable code is one of hooklog's `hook.*` codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class TranscriptUnreadable(Exception):
    """The transcript named by the hook could not be read; the hook's other steps still run."""


class ClaudeCodePayload(BaseModel):
    """The hook input fields the adapter reads. Claude Code adds fields across versions (permission_mode, model,
    prompt, stop_hook_active, …); they are ignored rather than refused, so a newer client never breaks the hook."""

    model_config = ConfigDict(extra="ignore")

    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    transcript_path: str | None = None
    cwd: str | None = None
    hook_event_name: str | None = None
    source: str | None = None  # SessionStart: startup, resume, clear, compact
    trigger: str | None = None  # PreCompact: manual, auto
    reason: str | None = None  # SessionEnd: clear, logout, prompt_input_exit, other

    @field_validator("transcript_path", "cwd")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        # A NUL, another control character or a lone surrogate is no path the client writes: os calls raise on
        # them (ValueError, UnicodeEncodeError), which is the payload's fault, not a bug of the hook.
        if value is not None and (len(value) > 4096 or any(ord(char) < 32 or 0xD800 <= ord(char) < 0xE000
                                                           for char in value)):
            raise ValueError("not a usable path")
        return value


class HookResult(Result):
    event: str
    session_id: str
    imported: int
    duplicates: int
    transcript_error: str | None
    compaction: CompactionResult | None
    stopped: bool
    output: dict[str, Any] | None  # what the hook prints on stdout, if anything


def _workspace(caller: Caller) -> str | None:
    return str(caller.cwd) if caller.cwd is not None else None


def _ensure_started(payload: ClaudeCodePayload, caller: Caller) -> Any:
    """Every event starts or looks up the session: a client without the SessionStart hook (or one resumed from
    outside) still gets a ledger, and a stopped session that the agent resumed runs again."""
    return session_start(data=SessionStartInput(session_id=payload.session_id, workspace=_workspace(caller),
                                                agent_name=CLAUDE_CODE_AGENT), caller=caller)


@dataclass
class _Read:
    chunk: claude_code.Chunk
    start: int


def _read_transcript(path: str | None, offset: int, limit: int) -> _Read | None:
    """The transcript's whole lines from `offset` (from its start when it is now shorter: rewritten), at most
    `limit` bytes of them; None when there is no transcript (yet)."""
    if not path:
        return None
    try:
        data, size = files.read_regular_range(Path(path).expanduser(), offset, limit)
    except FileNotFoundError:
        return None  # nothing written yet (a session that has not answered anything)
    except OSError as exc:
        raise TranscriptUnreadable(f"{type(exc).__name__}: {exc.strerror or exc}") from None
    except ValidationError:
        raise TranscriptUnreadable("the transcript is not a regular file (a FIFO or a device is never read)") \
            from None
    start = offset if offset <= size else 0
    chunk = claude_code.parse_chunk(data, start=start, at_end=start + len(data) >= size, limit=limit)
    return _Read(chunk, start)


# At most this many bad lines are logged one by one per call; the rest are counted in one more line.
_LOGGED_PROBLEMS = 20


def _record_problems(problems: list[claude_code.LineProblem], payload: ClaudeCodePayload, event: str) -> None:
    """Each bad line once: the next call reads on after it, so it is never met again."""
    for problem in problems[:_LOGGED_PROBLEMS]:
        log_failure(code=LINE_INVALID, client=CLAUDE_CODE_AGENT, event=event, session_id=payload.session_id,
                    message=f"transcript line at byte {problem.offset} {problem.action}: {problem.reason}")
    if len(problems) > _LOGGED_PROBLEMS:
        log_failure(code=LINE_INVALID, client=CLAUDE_CODE_AGENT, event=event, session_id=payload.session_id,
                    message=f"{len(problems) - _LOGGED_PROBLEMS} more bad transcript lines skipped or cut")


def _valid_events(rows: list[claude_code.Row], offsets: dict[str, int]) -> tuple[list[dict[str, Any]],
                                                                                 list[claude_code.LineProblem]]:
    """The rows as events the append accepts; a row it would refuse is left out, so one row never fails the rest."""
    events, problems = [], []
    for row in rows:
        event = row.as_event()
        try:
            EventInput.model_validate(event)
        except PydanticValidationError:
            line = row.external_key.split(":", 1)[0]
            problems.append(claude_code.LineProblem(offsets.get(line, -1), "row_invalid", "skipped"))
            continue
        events.append(event)
    return events, problems


def _import(payload: ClaudeCodePayload, caller: Caller, *, event: str,
            close_turn: str) -> tuple[int, int, str | None]:
    """(rows appended, rows already there, transcript error). Each call reads on from where the last one stopped
    (`memory_sessions.transcript_offset`), at most `session.hooks.transcript_read_bytes`, so a huge transcript is
    imported over several calls and a bad line, skipped or cut and logged, is met once. Lines are keyed by uuid,
    so a line read again (after a crash, or a rewritten transcript read from its start) is a no-op.
    `close_turn`: "" leaves the turn open, "answered" closes it once its reply is in the transcript (Stop),
    "always" closes it (SessionEnd)."""
    error = None
    limit = get_config(None).session.hooks.transcript_read_bytes
    try:
        read = _read_transcript(payload.transcript_path, ledger.transcript_offset(payload.session_id), limit)
    except TranscriptUnreadable as exc:
        read, error = None, str(exc)
    last = ledger.last_imported(payload.session_id)
    # Read from the start, the mapping is replayed from no turn; read on, the turn in effect is the last row's.
    turn = last[1] if last is not None and read is not None and read.start > 0 else ""
    if read is None and last is not None:
        turn = last[1]
    lines = read.chunk.lines if read is not None else []
    mapped = claude_code.rows_of(lines, current_turn=turn)
    offsets = dict(zip((line.get("uuid") for line in lines), read.chunk.offsets, strict=True)) if read else {}
    events, refused = _valid_events(mapped.rows, offsets)
    before = (last[1], last[2]) if last is not None else None
    if mapped.last_turn and (close_turn == "always"
                             or (close_turn == "answered" and claude_code.answered(mapped, before=before))):
        events.append(claude_code.turn_end(mapped.last_turn).as_event())
    appended = duplicates = 0
    for offset in range(0, len(events), MAX_BATCH):
        result = session_append(data=SessionAppendInput(session_id=payload.session_id,
                                                        workspace=_workspace(caller),
                                                        events=events[offset:offset + MAX_BATCH]), caller=caller)
        appended += result.appended
        duplicates += result.duplicates
    if read is not None:
        ledger.set_transcript_offset(payload.session_id, read.chunk.next_offset)
        _record_problems(read.chunk.problems + refused, payload, event)
    return appended, duplicates, error


def hook_claude_code(*, event: ClaudeCodeEvent, payload: ClaudeCodePayload, caller: Caller) -> HookResult:
    result: dict[str, Any] = {"event": event, "session_id": payload.session_id, "imported": 0, "duplicates": 0,
                              "transcript_error": None, "compaction": None, "stopped": False, "output": None}
    started = _ensure_started(payload, caller)
    if event == "SessionStart":
        context = started.snapshot.text
        if payload.source in CONTEXT_REBUILT:
            context = session_context_after_compaction(
                data=SessionIdInput(session_id=payload.session_id, workspace=_workspace(caller)), caller=caller,
                frozen=context)
        result["output"] = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
        return HookResult(**result)
    imported, duplicates, error = _import(payload, caller, event=event, close_turn=CLOSES_TURN.get(event, ""))
    result.update(imported=imported, duplicates=duplicates, transcript_error=error)
    ids = {"session_id": payload.session_id, "workspace": _workspace(caller)}
    if event == "PreCompact":
        result["compaction"] = session_compact(data=SessionCompactInput(**ids), caller=caller)
    if event == "SessionEnd":
        session_stop(data=SessionIdInput(**ids), caller=caller)
        result["stopped"] = True
    return HookResult(**result)


CLIENTS = ("claude-code",)


def hook_payload(*, client: str, event: str, raw: bytes) -> ClaudeCodePayload:
    """The hook's stdin as a payload, or a HookFailure with the code that says why not."""
    if client not in CLIENTS or event not in CLAUDE_CODE_EVENTS:
        raise HookFailure("hook.event_unknown", f"{client} {event} is not a hook this adapter handles")
    try:
        return ClaudeCodePayload.model_validate(jsondepth.loads(raw.decode("utf-8")))
    # ValueError: not UTF-8, not JSON, nested too deeply, a number too long to convert.
    except (ValueError, PydanticValidationError) as exc:
        raise HookFailure("hook.payload_invalid", f"stdin is not a usable hook payload: {type(exc).__name__}") \
            from None


def hook_failure_record(*, code: str, message: str, client: str = "", event: str = "", session_id: str = "") -> None:
    """Log a hook's failure (always) and record its event (when the database answers). Never raises."""
    log_failure(code=code, message=message, client=client, event=event, session_id=session_id)
    # The database may be what failed: the log line stands either way.
    with contextlib.suppress(Exception):
        event_record(op=EventOp.SESSION_HOOK_FAILED, session_id=session_id, actor=client or "hook",
                     metadata={"code": code, "event": event, "client": client})


class HookRunInput(Input):
    """One hook call as the agent runtime made it: what `compozy hook <client> <event>` read on stdin, unparsed, so
    the service over the socket and the command in-process refuse the same payloads with the same codes."""

    client: str = Field(max_length=64, description="The agent runtime: claude-code.")
    event: str = Field(max_length=64, description="The hook event, as the client names it (SessionStart, Stop, …).")
    stdin: str = Field(description="The hook's JSON payload, as the hook read it on stdin.")
    cwd: str | None = Field(default=None, max_length=4096, description=(
        "The hook process's working directory: the workspace when the payload names no cwd."))


class HookRunResult(Result):
    """`output` is exactly what the hook prints on stdout (nothing when None); `failure` the stable code logged to
    hooks.log when the hook could not run (the hook still exits 0)."""

    output: dict[str, Any] | None
    failure: str | None


def hook_run(*, data: HookRunInput, caller: Caller) -> HookRunResult:
    """Run one agent hook: validate the payload, drive the ledger, and log a failure instead of raising one. The
    thin client (`compozy/cli.py`) posts here over the Unix socket; the in-process fallback calls it directly."""
    client, event, session_id = data.client, data.event, ""
    try:
        payload = hook_payload(client=client, event=event, raw=data.stdin.encode("utf-8", "surrogateescape"))
        session_id = payload.session_id
        cwd = Path(payload.cwd) if payload.cwd else Path(data.cwd or os.getcwd())
        result = hook_claude_code(event=event, payload=payload,  # type: ignore[arg-type]
                                  caller=Caller(origin=caller.origin, cwd=cwd, session_id=payload.session_id))
    except CompozyError as error:
        code = "hook.event_unknown" if error.details.get("reason") == "usage" else error.code
        hook_failure_record(code=code, message=error.message, client=client, event=event, session_id=session_id)
        return HookRunResult(output=None, failure=code)
    if result.transcript_error:
        hook_failure_record(code="hook.transcript_unreadable", message=result.transcript_error, client=client,
                            event=event, session_id=session_id)
    return HookRunResult(output=result.output, failure=None)
