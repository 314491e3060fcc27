"""The session ledger: each session's events in order, apart from the memory write path.

Rows are appended in one IMMEDIATE transaction per batch. The session row's `last_seq` is raised in that same
transaction, so seq is gap-free and unique per session even with writers in several processes (SQLite's write
lock is taken at BEGIN). A row may carry an external key (a transcript line's uuid); a key already stored for the
session is skipped, so importing the same line twice is a no-op.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from memory.domain.enums import MESSAGE_KINDS, SessionEventKind, SessionStatus
from memory.domain.errors import Conflict, NotFound
from memory.domain.models import format_timestamp, utc_now

# SQLite limits a statement's bound parameters; key lookups are chunked below it.
_KEY_CHUNK = 500


@dataclass(frozen=True)
class NewEvent:
    kind: str
    content: str = ""
    turn_id: str = ""
    agent_name: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    ts: datetime | None = None
    external_key: str = ""


@dataclass(frozen=True)
class Appended:
    appended: int
    duplicates: int
    first_seq: int | None
    last_seq: int
    # (turn_id, seq) of each assistant message appended: the hook point for the extractor.
    assistant_turns: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class EventRow:
    seq: int
    turn_id: str
    kind: str
    agent_name: str
    content: str
    data: dict[str, Any]
    ts: datetime
    archived: bool
    external_key: str


_INSERT = (
    "INSERT INTO memory_session_events (session_id, workspace_id, seq, turn_id, kind, agent_name, content, data, "
    "ts, archived, external_key) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s)"
)
_COLUMNS = "seq, turn_id, kind, agent_name, content, data, ts, archived, external_key"


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def stored_keys_sql(count: int) -> str:
    """The lookup of `count` external keys already stored for a session. SQLite uses a partial index only when the
    query repeats the index's condition, so `NOT (external_key = '')` is spelled exactly as the unique index
    session_event_external_key declares it: without it the lookup walks every row of the session, and each batch
    of an import costs more the longer the session is."""
    marks = ", ".join("%s" for _ in range(count))
    return (f"SELECT external_key FROM memory_session_events WHERE session_id = %s AND NOT (external_key = '') "
            f"AND external_key IN ({marks})")


def _stored_keys(cursor: Any, session_id: str, keys: list[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(keys, _KEY_CHUNK):
        cursor.execute(stored_keys_sql(len(chunk)), [session_id, *chunk])
        found.update(row[0] for row in cursor.fetchall())
    return found


def append(session_id: str, workspace_id: str, events: Iterable[NewEvent]) -> Appended:
    batch = list(events)
    adapt = connection.ops.adapt_datetimefield_value
    now = utc_now()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT status, last_seq, agent_name FROM memory_sessions WHERE session_id = %s "
                       "AND workspace_id = %s", [session_id, workspace_id])
        head = cursor.fetchone()
        if head is None:
            raise NotFound(f"No session {session_id} here.", details={"session_id": session_id})
        if head[0] == SessionStatus.SNAPSHOT.value:
            raise Conflict(f"Session {session_id} has a snapshot but was never started; start it to append.",
                           details={"session_id": session_id, "reason": "session_not_started"})
        if head[0] != SessionStatus.RUNNING.value:
            raise Conflict(f"Session {session_id} is stopped; start it again to append.",
                           details={"session_id": session_id, "reason": "session_stopped"})
        keys = [event.external_key for event in batch if event.external_key]
        seen = _stored_keys(cursor, session_id, keys) if keys else set()
        fresh: list[NewEvent] = []
        for event in batch:
            if event.external_key:
                if event.external_key in seen:
                    continue
                seen.add(event.external_key)
            fresh.append(event)
        if not fresh:
            return Appended(0, len(batch), None, head[1])
        cursor.execute("UPDATE memory_sessions SET last_seq = last_seq + %s WHERE session_id = %s RETURNING last_seq",
                       [len(fresh), session_id])
        last = cursor.fetchone()[0]
        first = last - len(fresh) + 1
        stamp = adapt(now)
        cursor.executemany(_INSERT, [
            [session_id, workspace_id, first + index, event.turn_id, event.kind, event.agent_name or head[2],
             event.content,
             json.dumps(event.data, ensure_ascii=False) if event.data else "{}",
             adapt(event.ts) if event.ts else stamp, event.external_key]
            for index, event in enumerate(fresh)
        ])
    turns = tuple((event.turn_id, first + index) for index, event in enumerate(fresh)
                  if event.kind == SessionEventKind.ASSISTANT_MESSAGE)
    return Appended(len(fresh), len(batch) - len(fresh), first, last, turns)


def _row(values: Sequence[Any]) -> EventRow:
    seq, turn_id, kind, agent_name, content, data, ts, archived, external_key = values
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)  # raw reads of a UTC column come back naive
    return EventRow(seq, turn_id, kind, agent_name, content, json.loads(data) if isinstance(data, str) else data,
                    ts, bool(archived), external_key)


def page(session_id: str, *, after_seq: int, limit: int, kind: str | None = None,
         include_archived: bool = True, kinds: Sequence[str] = (), until_seq: int | None = None) -> list[EventRow]:
    """Rows after `after_seq` (and up to `until_seq`), in seq order: the read every consumer (surfaces, extractor,
    dreaming) shares. `kinds` keeps only rows of those kinds."""
    clauses = ["session_id = %s", "seq > %s"]
    params: list[Any] = [session_id, after_seq]
    if kind is not None:
        clauses.append("kind = %s")
        params.append(kind)
    if kinds:
        clauses.append(f"kind IN ({', '.join('%s' for _ in kinds)})")
        params.extend(kinds)
    if until_seq is not None:
        clauses.append("seq <= %s")
        params.append(until_seq)
    if not include_archived:
        clauses.append("archived = 0")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_COLUMNS} FROM memory_session_events WHERE {' AND '.join(clauses)} "
                       f"ORDER BY seq LIMIT %s", [*params, limit])
        return [_row(values) for values in cursor.fetchall()]


def last_seq_of_kind(session_id: str, *, kind: str, at_most: int) -> int | None:
    """The seq of the session's newest `kind` row at or before `at_most` (walks the seq index backwards)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq FROM memory_session_events WHERE session_id = %s AND seq <= %s AND kind = %s "
                       "ORDER BY seq DESC LIMIT 1", [session_id, at_most, kind])
        found = cursor.fetchone()
    return found[0] if found else None


def exchange_marks(session_id: str, *, from_seq: int, until_seq: int, opener: str, call: str,
                   needle: str) -> list[tuple[int, str, str]]:
    """(seq, kind, name) in [from_seq, until_seq] of the `opener` rows (where an exchange starts; name "") and of
    the `call` rows whose content or data contains `needle` (name: the call's `data.name`, else its content): what
    tells which exchanges called a given tool, without reading and decoding every row between them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq, kind, content, data FROM memory_session_events WHERE session_id = %s AND seq >= %s "
            "AND seq <= %s AND (kind = %s OR (kind = %s AND (instr(content, %s) > 0 OR instr(data, %s) > 0))) "
            "ORDER BY seq", [session_id, from_seq, until_seq, opener, call, needle, needle])
        rows = cursor.fetchall()
    marks: list[tuple[int, str, str]] = []
    for seq, kind, content, data in rows:
        if kind != call:
            marks.append((seq, kind, ""))
            continue
        values = json.loads(data) if isinstance(data, str) else data
        marks.append((seq, kind, str((values or {}).get("name") or content or "")))
    return marks


def counts(session_id: str) -> tuple[int, int]:
    """(events, archived events) of a session."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(archived), 0) FROM memory_session_events "
                       "WHERE session_id = %s", [session_id])
        total, archived = cursor.fetchone()
    return int(total), int(archived)


@dataclass(frozen=True)
class Projection:
    """The bounded transcript a checkpoint or a compaction summary is made from, or a resume replays: the newest
    rows within the limits, oldest first, with what was cut said plainly."""

    messages: list[dict[str, Any]]
    omitted_messages: int  # older rows left out by the message or byte limit
    truncated: int  # rows whose content was cut to fit

    def payload(self) -> dict[str, Any]:
        return {"messages": self.messages, "cut": {"omitted_older_messages": self.omitted_messages,
                                                   "truncated_messages": self.truncated}}


CUT_MARK = "[… {n} bytes cut …]"


def projection(session_id: str, *, max_messages: int, max_bytes: int, from_seq: int | None = None,
               to_seq: int | None = None, kinds: Iterable[str] | None = None) -> Projection:
    """Unarchived rows of the given kinds (messages by default) in [from_seq, to_seq], newest first until the
    message or byte limit, returned oldest first. One row never takes more than an eighth of the byte budget:
    a huge tool output is cut in the middle with a marker instead of crowding out everything before it."""
    wanted = sorted(kinds if kinds is not None else MESSAGE_KINDS)
    clauses = ["session_id = %s", "archived = 0", f"kind IN ({', '.join('%s' for _ in wanted)})"]
    params: list[Any] = [session_id, *wanted]
    if from_seq is not None:
        clauses.append("seq >= %s")
        params.append(from_seq)
    if to_seq is not None:
        clauses.append("seq <= %s")
        params.append(to_seq)
    where = " AND ".join(clauses)
    per_message = max(256, max_bytes // 8)
    kept: list[dict[str, Any]] = []
    used = 0
    truncated = 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM memory_session_events WHERE {where}", params)
        available = cursor.fetchone()[0]
        cursor.execute(f"SELECT seq, turn_id, kind, content, data, ts FROM memory_session_events WHERE {where} "
                       f"ORDER BY seq DESC LIMIT %s", [*params, max_messages])
        for seq, turn_id, kind, content, data, ts in cursor.fetchall():
            raw = content.encode("utf-8")
            if len(raw) > per_message:
                half = per_message // 2
                content = (raw[:half].decode("utf-8", "ignore") + "\n" + CUT_MARK.format(n=len(raw) - 2 * half)
                           + "\n" + raw[-half:].decode("utf-8", "ignore"))
                truncated += 1
            size = len(content.encode("utf-8")) + 64
            if kept and used + size > max_bytes:
                break
            used += size
            # ts: when it was said (the client's own time), so what the checkpoint keeps from it is dated by it.
            kept.append({"seq": seq, "turn_id": turn_id, "kind": kind, "content": content,
                         "data": json.loads(data) if isinstance(data, str) else data, "ts": _iso(ts)})
    kept.reverse()
    return Projection(kept, available - len(kept), truncated)


def _iso(value: Any) -> str:
    """A stored event time (SQLite's text, UTC) as ISO 8601 with its zone, or "" when there is none."""
    if not value:
        return ""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return format_timestamp(when if when.tzinfo else when.replace(tzinfo=UTC))


def last_imported(session_id: str) -> tuple[str, str, str] | None:
    """(external key, turn id, kind) of the newest row imported from a client's record, not counting `done:`
    rows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT external_key, turn_id, kind FROM memory_session_events WHERE session_id = %s "
                       "AND external_key != '' AND external_key NOT LIKE 'done:%%' ORDER BY seq DESC LIMIT 1",
                       [session_id])
        row = cursor.fetchone()
    return (row[0], row[1], row[2]) if row else None


def transcript_offset(session_id: str) -> int:
    """How many bytes of the session's client transcript have been read (0 for an unknown session)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT transcript_offset FROM memory_sessions WHERE session_id = %s", [session_id])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def set_transcript_offset(session_id: str, offset: int) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_sessions SET transcript_offset = %s WHERE session_id = %s", [offset, session_id])


def latest_ts(session_id: str) -> datetime | None:
    """When the session's newest row happened (its own time, or when it was appended), or None for no rows."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT ts FROM memory_session_events WHERE session_id = %s ORDER BY seq DESC LIMIT 1",
                       [session_id])
        row = cursor.fetchone()
    if row is None:
        return None
    ts = datetime.fromisoformat(row[0]) if isinstance(row[0], str) else row[0]
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts
