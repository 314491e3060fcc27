"""Search over the session ledger's own turns: the last resort of a recall block when curated memory has too little.

The ledger keeps every user and assistant message of every session; a later question is often answered by one of
them word for word ("when did we switch the staging database?"), long before anyone wrote a memory about it. An
FTS5 index over those two kinds (external content: the text is stored once, in memory_session_events) finds them
by the same quoted, stemmed terms recall uses. A search only ever sees one workspace's turns, never a sub-agent's
(its parent's transcript carries what matters), and never the `_system/` memory roots: turns are not memories.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection

from memory.domain.enums import SessionEventKind

TABLE = "memory_session_turns_fts"
KINDS = (SessionEventKind.USER_MESSAGE.value, SessionEventKind.ASSISTANT_MESSAGE.value)
_KIND_LIST = ", ".join(f"'{kind}'" for kind in KINDS)
_WHEN = f"new.kind IN ({_KIND_LIST})"
_WHEN_OLD = f"old.kind IN ({_KIND_LIST})"

CREATE_SQL = [
    f"CREATE VIRTUAL TABLE {TABLE} USING fts5(agent_name, content, content='memory_session_events', "
    f"content_rowid='id', tokenize=\"unicode61 remove_diacritics 2\")",
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON memory_session_events WHEN {_WHEN} BEGIN "
    f"INSERT INTO {TABLE}(rowid, agent_name, content) VALUES (new.id, new.agent_name, new.content); END",
    # The same condition as the insert: deleting a row that was never indexed would corrupt the index.
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON memory_session_events WHEN {_WHEN_OLD} BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, agent_name, content) "
    f"VALUES ('delete', old.id, old.agent_name, old.content); END",
    # Archiving a row (compaction) changes no text: only a change of the text re-indexes it.
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE OF content, agent_name, kind ON memory_session_events BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, agent_name, content) SELECT 'delete', old.id, old.agent_name, "
    f"old.content WHERE {_WHEN_OLD}; "
    f"INSERT INTO {TABLE}(rowid, agent_name, content) SELECT new.id, new.agent_name, new.content "
    f"WHERE {_WHEN}; END",
    f"INSERT INTO {TABLE}(rowid, agent_name, content) SELECT id, agent_name, content FROM memory_session_events "
    f"WHERE kind IN ('user_message', 'assistant_message')",
]
DROP_SQL = [f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}" for suffix in ("ai", "ad", "au")] + [
    f"DROP TABLE IF EXISTS {TABLE}"]


@dataclass(frozen=True)
class TurnHit:
    session_id: str
    seq: int
    agent_name: str
    content: str
    ts: datetime
    rank: float
    kind: str = "user_message"

    @property
    def speaker(self) -> str:
        """Who said it: the event's agent name, else the side of the conversation (`user`, `assistant`)."""
        return self.agent_name or self.kind.removesuffix("_message")


def search_turns(expression: str, *, workspace_id: str, limit: int, exclude_session: str = "") -> list[TurnHit]:
    """The workspace's turns matching an FTS5 expression (built from quoted terms only), best first."""
    if not expression or not workspace_id:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.session_id, e.seq, e.agent_name, e.content, e.ts, bm25({TABLE}) AS rank, e.kind "
            f"FROM {TABLE} JOIN memory_session_events e ON e.id = {TABLE}.rowid "
            f"JOIN memory_sessions s ON s.session_id = e.session_id "
            f"WHERE {TABLE} MATCH %s AND e.workspace_id = %s AND e.session_id != %s "
            f"AND s.parent_session_id = '' AND s.type NOT IN ('dream', 'system') "
            f"ORDER BY rank, e.ts, e.seq LIMIT %s",
            [expression, workspace_id, exclude_session, limit])
        rows = cursor.fetchall()
    hits = []
    for session_id, seq, agent_name, content, ts, rank, kind in rows:
        hits.append(TurnHit(session_id, seq, agent_name, content, _aware(ts), float(rank), kind))
    return hits


def turn_successors(anchors: list[tuple[str, int]], *, window: int) -> list[tuple[int, int, TurnHit]]:
    """For each anchor (session id, seq), by its position in `anchors`, the next `window` turns of its session
    (user and assistant messages only: tool calls and markers are not said): (anchor index, distance from 1,
    turn). Each anchor is one indexed range read of its session."""
    found: list[tuple[int, int, TurnHit]] = []
    if window < 1:
        return found
    with connection.cursor() as cursor:
        for index, (session_id, seq) in enumerate(anchors):
            cursor.execute(
                "SELECT session_id, seq, agent_name, content, ts, kind FROM memory_session_events "
                "WHERE session_id = %s AND seq > %s AND kind IN ('user_message', 'assistant_message') "
                "ORDER BY seq LIMIT %s", [session_id, seq, window])
            for distance, (sid, turn_seq, agent_name, content, ts, kind) in enumerate(cursor.fetchall(), 1):
                found.append((index, distance, TurnHit(sid, turn_seq, agent_name, content, _aware(ts), 0.0, kind)))
    return found


def _aware(ts: datetime | str) -> datetime:
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
