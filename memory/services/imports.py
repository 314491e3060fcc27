"""The import noun: memory and history another tool kept before Compozy, brought in through the controller and the
session ledger. Claude Code first (`compozy import claude-code`).

What comes in, from `~/.claude/projects/<project>/` (read by `memory.importers.claude_code`, which never writes
there and never follows a link):
- each auto-memory file (`memory/*.md`) becomes a memory through the controller, origin `import`, in the scope its
  type defaults to (user and feedback global, project and reference the project's workspace), dated by the file's
  own modification time; each is a decision that `decisions revert` undoes, and the content scanner applies
- with `sessions`, each transcript (`<session>.jsonl`) goes into the ledger as the hooks would have put it, each
  line once (its uuid is the row's external key) with the line's own timestamp, then the session is stopped, which
  queues the checkpoint update and the extractor as for a session that just ended; oldest session first

`memory_imports` remembers each source file's hash and the memory it made, so a second import adds nothing, an
edited file becomes an update of its memory, and a memory deleted in Compozy since is reported, never brought back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from django.db.models import Sum
from pydantic import Field, field_validator

from memory.domain.document import check_body, normalize_body
from memory.domain.enums import Op, Origin, RequestKind, Scope, SessionEventKind
from memory.domain.errors import CompozyError, ValidationError
from memory.domain.models import Candidate, Frontmatter, Provenance, format_timestamp, utc_now
from memory.domain.names import memory_filename
from memory.importers import claude_code as reader
from memory.models import ExtractorSession, ImportRecord
from memory.sessions import claude_code as transcripts
from memory.store import files

from .inputs import Caller, Input, Selector
from .resolution import resolve
from .results import Result
from .scopes import DEFAULT_SCOPE_BY_TYPE, resolve_ref
from .sessions import (
    MAX_BATCH,
    SessionAppendInput,
    SessionIdInput,
    SessionStartInput,
    session_append,
    session_start,
    session_stop,
)
from .writes import candidate_submit

SOURCE = "claude-code"
AGENT = "claude-code"
Progress = Callable[[int, int], None]

FileOutcome = Literal["added", "updated", "unchanged", "refused", "skipped", "would_add", "would_update"]


class ClaudeCodeImportInput(Input):
    claude_dir: str | None = Field(default=None, description=(
        "Claude Code's folder. Default: $CLAUDE_CONFIG_DIR, else ~/.claude. Nothing in it is ever written."))
    sessions: bool = Field(default=False, description=(
        "Also import past sessions' transcripts into the session ledger (each line once, with its own time), then "
        "through the extractor and the checkpoint, oldest first."))
    since: str | None = Field(default=None, description=(
        "With sessions: only transcripts changed on or after this date (YYYY-MM-DD, or an RFC 3339 time)."))
    dry_run: bool = Field(default=False, description=(
        "Say what would be imported and where, and write nothing (no memory, no session, no workspace)."))

    @field_validator("since")
    @classmethod
    def _since(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("since is a date (YYYY-MM-DD) or an RFC 3339 time") from None
        return format_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


class ImportedProject(Result):
    source: str = Field(description="The project's folder, relative to Claude Code's folder.")
    checkout: str | None = Field(description="The checkout it belongs to; null when it is not on this machine.")
    memories: int
    transcripts: int


class ImportedFile(Result):
    source: str = Field(description="The auto-memory file, relative to Claude Code's folder.")
    outcome: FileOutcome
    scope: Scope | None
    workspace: str | None = Field(description="The workspace directory it went to (project and reference).")
    filename: str | None
    decision_id: str | None
    reason: str | None = Field(description="Why it was refused or skipped, or what the controller decided.")


class ImportedSession(Result):
    source: str
    session_id: str
    workspace: str | None
    outcome: Literal["imported", "unchanged", "skipped", "would_import"]
    turns: int = Field(description="The transcript's turns (a user prompt and what answered it).")
    rows: int = Field(description="Ledger rows appended by this import (rows imported before are not counted).")
    reason: str | None


class ImportProblem(Result):
    source: str
    reason: str
    detail: str


class ImportSummary(Result):
    files: int
    added: int
    updated: int
    unchanged: int
    refused: int
    skipped: int
    sessions: int
    turns: int
    candidates: int = Field(description="Memories the extractor proposed from the imported sessions so far (it runs "
                                        "on the task cluster after each session's stop).")


class ImportResult(Result):
    claude_dir: str
    dry_run: bool
    projects: list[ImportedProject]
    files: list[ImportedFile]
    sessions: list[ImportedSession]
    problems: list[ImportProblem]
    summary: ImportSummary


class _Place(Selector):
    # The import is the operator's explicit request for this checkout: its workspace may be created there even
    # when it is not a git checkout (system directories and other users' directories are still refused).
    create_workspace: bool = True


def _record(key: str) -> ImportRecord | None:
    return ImportRecord.objects.filter(source=SOURCE, source_key=key).first()


def _save(key: str, *, kind: str, source_hash: str, root_key: str = "", filename: str = "",
          decision_id: str = "") -> None:
    ImportRecord.objects.update_or_create(
        source=SOURCE, source_key=key,
        defaults={"source_hash": source_hash, "kind": kind, "root_key": root_key, "filename": filename,
                  "decision_id": decision_id, "imported_at": utc_now()})


def _file(memory: reader.AutoMemory, outcome: FileOutcome, *, scope: Scope | None = None,
          workspace: Path | None = None, filename: str | None = None, decision_id: str | None = None,
          reason: str | None = None) -> ImportedFile:
    return ImportedFile(source=memory.source, outcome=outcome, scope=scope,
                        workspace=str(workspace) if workspace else None, filename=filename,
                        decision_id=decision_id, reason=reason)


def _import_memory(memory: reader.AutoMemory, checkout: Path | None, caller: Caller, *,
                   dry_run: bool) -> ImportedFile:
    scope = DEFAULT_SCOPE_BY_TYPE[memory.type]
    workspace = checkout if scope is Scope.WORKSPACE else None
    if scope is Scope.WORKSPACE and checkout is None:
        return _file(memory, "skipped", scope=scope, reason="checkout_missing: the project's checkout is not on "
                                                            "this machine, so its workspace is unknown")
    record = _record(memory.source)
    if record is not None and record.source_hash == memory.sha256:
        return _file(memory, "unchanged", scope=scope, workspace=workspace, filename=record.filename or None,
                     decision_id=record.decision_id or None, reason="imported before, unchanged since")
    filename = record.filename if record is not None and record.filename else memory_filename(memory.type,
                                                                                              memory.name)
    if dry_run:
        return _file(memory, "would_update" if record is not None and record.filename else "would_add",
                     scope=scope, workspace=workspace, filename=filename)
    place = _Place(scope=scope, workspace=str(checkout) if workspace else None)
    resolved = resolve(place, caller, create_workspace=scope is Scope.WORKSPACE)
    ref = resolve_ref(place, memory.type, resolved)
    root = resolved.root(ref)
    updating = record is not None and bool(record.filename)
    if updating and files.read_bytes(root, filename) is None:
        return _file(memory, "skipped", scope=scope, workspace=workspace, filename=filename,
                     reason="deleted_in_compozy: the memory it made was deleted since; it is not brought back")
    body = normalize_body(memory.body)
    check_body(body, resolved.limits)
    when = format_timestamp(memory.modified_at)
    front = Frontmatter.build(name=memory.name, description=memory.description, type=memory.type, scope=ref.scope,
                              provenance=Provenance(source_actor=Origin.IMPORT).model_dump(exclude_none=True))
    candidate = Candidate(ref=ref, origin=Origin.IMPORT, kind=RequestKind.WRITE, frontmatter=front, body=body,
                          target_filename=filename, named_target=updating, session_id=caller.session_id,
                          occurred_at=when)
    result = candidate_submit(candidate, root=root, config=resolved.config)
    decision = result.decision
    applied = decision.op in (Op.ADD.value, Op.UPDATE.value)
    _save(memory.source, kind="memory", source_hash=memory.sha256, root_key=ref.root_key,
          filename=decision.target_filename if applied or updating else "", decision_id=decision.id)
    outcome: FileOutcome = ("added" if decision.op == Op.ADD else "updated" if decision.op == Op.UPDATE
                            else "unchanged")
    return _file(memory, outcome, scope=scope, workspace=workspace, filename=decision.target_filename or filename,
                 decision_id=decision.id, reason=None if applied else decision.reason)


def _session(transcript: reader.Transcript, outcome: str, *, workspace: Path | None = None, turns: int = 0,
             rows: int = 0, reason: str | None = None) -> ImportedSession:
    return ImportedSession(source=transcript.source, session_id=transcript.session_id,
                           workspace=str(workspace) if workspace else None, outcome=outcome, turns=turns, rows=rows,
                           reason=reason)


def _transcript_hash(transcript: reader.Transcript) -> str:
    # Transcripts only grow: their size and modification time say whether anything was added since.
    return f"{transcript.size}:{transcript.modified_at.isoformat()}"


def _import_session(transcript: reader.Transcript, checkout: Path | None, caller: Caller, *,
                    dry_run: bool) -> ImportedSession:
    if checkout is None:
        return _session(transcript, "skipped", reason="checkout_missing")
    record = _record(transcript.source)
    if record is not None and record.source_hash == _transcript_hash(transcript):
        return _session(transcript, "unchanged", workspace=checkout, reason="imported before, unchanged since")
    if dry_run:
        return _session(transcript, "would_import", workspace=checkout)
    lines = reader.transcript_lines(transcript)
    if isinstance(lines, str):
        return _session(transcript, "skipped", workspace=checkout, reason=lines)
    mapped = transcripts.rows_of(lines)
    events = [row.as_event() for row in mapped.rows]
    if mapped.last_turn:
        # The session is over: its last turn is complete, as the Stop hook would have recorded it.
        events.append(transcripts.turn_end(mapped.last_turn).as_event())
    if not events:
        _save(transcript.source, kind="transcript", source_hash=_transcript_hash(transcript))
        return _session(transcript, "skipped", workspace=checkout, reason="no_messages")
    ids = {"session_id": transcript.session_id, "workspace": str(checkout)}
    session_start(data=SessionStartInput(**ids, agent_name=AGENT), caller=caller)
    rows = 0
    for offset in range(0, len(events), MAX_BATCH):
        rows += session_append(data=SessionAppendInput(**ids, events=events[offset:offset + MAX_BATCH]),
                               caller=caller).appended
    session_stop(data=SessionIdInput(**ids), caller=caller)
    _save(transcript.source, kind="transcript", source_hash=_transcript_hash(transcript))
    turns = sum(1 for row in mapped.rows if row.kind == SessionEventKind.USER_MESSAGE)
    return _session(transcript, "imported", workspace=checkout, turns=turns, rows=rows)


def import_claude_code(*, data: ClaudeCodeImportInput, caller: Caller,
                       progress: Progress | None = None) -> ImportResult:
    claude_dir = Path(data.claude_dir).expanduser() if data.claude_dir else reader.default_claude_dir()
    if not (claude_dir / "projects").is_dir():
        raise ValidationError(f"No Claude Code projects folder in {claude_dir}: give claude_dir.",
                              details={"field": "claude_dir", "reason": "not_found", "path": str(claude_dir)})
    projects, problems = reader.read_projects(claude_dir)
    problems = [*problems, *(problem for project in projects for problem in project.problems)]
    work: list[tuple[reader.Project, reader.AutoMemory | reader.Transcript]] = [
        (project, memory) for project in projects for memory in project.memories]
    if data.sessions:
        chosen = [(project, transcript) for project in projects for transcript in project.transcripts
                  if data.since is None or format_timestamp(transcript.modified_at) >= data.since]
        work += sorted(chosen, key=lambda item: (item[1].modified_at, item[1].source))
    imported_files: list[ImportedFile] = []
    imported_sessions: list[ImportedSession] = []
    for done, (project, item) in enumerate(work, start=1):
        if isinstance(item, reader.AutoMemory):
            try:
                imported_files.append(_import_memory(item, project.checkout, caller, dry_run=data.dry_run))
            except CompozyError as exc:
                # A refused file (the scanner, a size limit, an invalid name) is reported and the rest goes on.
                imported_files.append(_file(item, "refused", scope=DEFAULT_SCOPE_BY_TYPE[item.type],
                                            reason=f"{exc.code}: {exc}"))
        else:
            imported_sessions.append(_import_session(item, project.checkout, caller, dry_run=data.dry_run))
        if progress is not None:
            progress(done, len(work))
    session_ids = [s.session_id for s in imported_sessions if s.outcome == "imported"]
    candidates = (ExtractorSession.objects.filter(session_id__in=session_ids).aggregate(n=Sum("candidates"))["n"]
                  if session_ids else 0) or 0
    count = {outcome: sum(1 for f in imported_files if f.outcome == outcome) for outcome in FileOutcome.__args__}
    summary = ImportSummary(
        files=len(imported_files), added=count["added"] + count["would_add"],
        updated=count["updated"] + count["would_update"], unchanged=count["unchanged"], refused=count["refused"],
        skipped=count["skipped"], sessions=sum(1 for s in imported_sessions if s.outcome in ("imported",
                                                                                             "would_import")),
        turns=sum(s.turns for s in imported_sessions), candidates=candidates)
    return ImportResult(
        claude_dir=str(claude_dir), dry_run=data.dry_run,
        projects=[ImportedProject(source=p.source, checkout=str(p.checkout) if p.checkout else None,
                                  memories=len(p.memories), transcripts=len(p.transcripts)) for p in projects],
        files=imported_files, sessions=imported_sessions,
        problems=[ImportProblem(source=p.source, reason=p.reason, detail=p.detail) for p in problems],
        summary=summary)
