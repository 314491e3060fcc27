"""Claude Code transcripts as ledger events (pure Python).

The format, as documented (Claude Code hooks reference, https://code.claude.com/docs/en/hooks, "Hook input":
every hook gets `session_id`, `transcript_path`, `cwd`, `hook_event_name`, plus `source` for SessionStart,
`trigger` for PreCompact, `reason` for SessionEnd) and as published in the session JSON schema of the
oneryalcin/agent-schemas repository (claude-code/v2.1.1/session.schema.json):

- the transcript is JSON Lines; each line has `type`: `user`, `assistant`, `system`, `summary`,
  `file-history-snapshot` or `queue-operation`
- `user` and `assistant` lines carry `uuid`, `parentUuid`, `sessionId`, `timestamp`, `isSidechain` and
  `message: {role, content}`; `content` is a string or a list of blocks
- blocks: `text {text}`, `thinking {thinking, signature}`, `tool_use {id, name, input}`,
  `tool_result {tool_use_id, content (string or blocks), is_error}`, `image {source}`
- a `user` line may be `isMeta` (text the client injected) or `isCompactSummary` (the client's own compaction
  summary); an `assistant` line may be `isApiErrorMessage`

Mapping: a `user` line with text starts a turn (its uuid is the turn id) and is a `user_message`; its
`tool_result` blocks are `tool_result` rows of the current turn. An `assistant` line's text is an
`assistant_message`, each `tool_use` a `tool_call`, an API error an `error`. Thinking, images, sidechain (sub-agent)
lines, meta lines, compaction summaries and every other line type are left out. Each row's external key is the
line's uuid and the block (`:text`, `:error` or the block's index), so importing a line again is a no-op; a
turn's `done` row is keyed by its turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# One imported row never holds more than this; a huge tool output is cut with a marker.
MAX_CONTENT_CHARS = 64_000


@dataclass
class Row:
    kind: str
    content: str
    turn_id: str
    external_key: str
    ts: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def as_event(self) -> dict[str, Any]:
        event: dict[str, Any] = {"kind": self.kind, "content": self.content, "turn_id": self.turn_id or None,
                                 "external_key": self.external_key, "data": self.data or None}
        if self.ts:
            event["ts"] = self.ts
        return event


def _cut(text: str) -> str:
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    half = MAX_CONTENT_CHARS // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters cut …]\n{text[-half:]}"


def _text_of(content: Any) -> str:
    """The text of a tool result's content: a string, or text blocks joined (other blocks named)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return ""


def parse_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
    """(objects of the lines that are JSON objects, count of lines that are not)."""
    objects, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            bad += 1  # a line being written as we read it, or damage: never a reason to fail the import
            continue
        if isinstance(value, dict):
            objects.append(value)
        else:
            bad += 1
    return objects, bad


@dataclass
class Rows:
    rows: list[Row]
    last_turn: str  # the turn of the last user prompt seen ("" before any)


def rows_of(lines: list[dict[str, Any]], *, current_turn: str = "") -> Rows:
    """Ledger rows for transcript lines, in order. A new prompt closes the previous turn with a `done` row."""
    rows: list[Row] = []
    turn = current_turn
    for line in lines:
        kind = line.get("type")
        uuid = line.get("uuid")
        if kind not in ("user", "assistant") or not isinstance(uuid, str) or not uuid:
            continue
        if line.get("isSidechain") or line.get("isMeta") or line.get("isCompactSummary"):
            continue
        message = line.get("message") if isinstance(line.get("message"), dict) else {}
        content = message.get("content")
        ts = line.get("timestamp") if isinstance(line.get("timestamp"), str) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        if kind == "user":
            texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
            prompt = "\n".join(t for t in texts if t.strip())
            if prompt:
                # Re-reading the current turn's own prompt (an import resumes at the last line imported) is not a
                # new prompt: closing the turn there would put `done` before the reply that follows it.
                if turn and turn != uuid:
                    rows.append(Row("done", "", turn, f"done:{turn}", ts))
                turn = uuid
                rows.append(Row("user_message", _cut(prompt), turn, f"{uuid}:text", ts))
            for index, block in enumerate(blocks):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    data = {"tool_use_id": block.get("tool_use_id"), "is_error": bool(block.get("is_error"))}
                    rows.append(Row("tool_result", _cut(_text_of(block.get("content"))), turn,
                                    f"{uuid}:{index}", ts, data))
            continue
        if line.get("isApiErrorMessage"):
            rows.append(Row("error", _cut(_text_of(blocks)), turn, f"{uuid}:error", ts))
            continue
        texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        answer = "\n".join(t for t in texts if t.strip())
        if answer:
            rows.append(Row("assistant_message", _cut(answer), turn, f"{uuid}:text", ts))
        for index, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                data = {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
                rows.append(Row("tool_call", str(block.get("name") or "tool"), turn, f"{uuid}:{index}", ts,
                                data))
    return Rows(rows, turn)


# The rows that show the assistant has answered: a turn whose last row is the prompt or a tool's result still
# owes its reply.
ANSWERED_KINDS = ("assistant_message", "tool_call", "error")


def answered(rows: Rows) -> bool:
    """Whether the last turn's reply is in the rows read: Stop closes a turn only then, so a reply the client has
    not flushed to the transcript yet is never recorded after its turn's `done`."""
    return bool(rows.rows) and rows.rows[-1].turn_id == rows.last_turn and rows.rows[-1].kind in ANSWERED_KINDS


def turn_end(turn: str) -> Row:
    """The `done` row that closes a turn (the Stop hook: the assistant finished answering)."""
    return Row("done", "", turn, f"done:{turn}")
