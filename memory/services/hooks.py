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
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from memory.controller.events import event_record
from memory.domain.enums import EventOp
from memory.domain.errors import CompozyError
from memory.sessions import claude_code, ledger

from .hooklog import log_failure
from .inputs import Caller, Input
from .results import Result
from .sessions import (
    MAX_BATCH,
    SESSION_ID_PATTERN,
    CompactionResult,
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


def _read_transcript(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []  # nothing written yet (a session that has not answered anything)
    except OSError as exc:
        raise TranscriptUnreadable(f"{type(exc).__name__}: {exc.strerror or exc}") from None
    return claude_code.parse_lines(text.splitlines())[0]


def _import(payload: ClaudeCodePayload, caller: Caller, *, close_turn: str) -> tuple[int, int, str | None]:
    """(rows appended, rows already there, transcript error). Only lines after the last one imported are mapped;
    if that line is not found (a rewritten transcript), every line is, and the keys keep it idempotent.
    `close_turn`: "" leaves the turn open, "answered" closes it once its reply is in the transcript (Stop), "always"
    closes it (SessionEnd)."""
    error = None
    try:
        lines = _read_transcript(payload.transcript_path)
    except TranscriptUnreadable as exc:
        lines, error = [], str(exc)
    start, turn = 0, ""
    last = ledger.last_imported(payload.session_id)
    if last is not None:
        uuid = last[0].split(":", 1)[0]
        for index in range(len(lines) - 1, -1, -1):
            if lines[index].get("uuid") == uuid:
                start, turn = index, last[1]
                break
    mapped = claude_code.rows_of(lines[start:], current_turn=turn)
    events = [row.as_event() for row in mapped.rows]
    if mapped.last_turn and (close_turn == "always" or (close_turn == "answered" and claude_code.answered(mapped))):
        events.append(claude_code.turn_end(mapped.last_turn).as_event())
    appended = duplicates = 0
    for offset in range(0, len(events), MAX_BATCH):
        result = session_append(data=SessionAppendInput(session_id=payload.session_id,
                                                        workspace=_workspace(caller),
                                                        events=events[offset:offset + MAX_BATCH]), caller=caller)
        appended += result.appended
        duplicates += result.duplicates
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
    imported, duplicates, error = _import(payload, caller, close_turn=CLOSES_TURN.get(event, ""))
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
        return ClaudeCodePayload.model_validate(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, PydanticValidationError) as exc:
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
