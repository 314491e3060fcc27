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

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memory.domain import jsondepth
from memory.domain.enums import SessionEventKind
from memory.domain.models import parse_timestamp

# One imported row never holds more than this; a huge tool output is cut with a marker.
MAX_CONTENT_CHARS = 64_000


@dataclass
class Row:
    kind: SessionEventKind
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
    """(objects of the lines that are usable JSON objects, count of lines that are not)."""
    objects, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        value, problem = parse_line(line)
        if value is None:
            bad += 1  # a line being written as we read it, or damage: never a reason to fail the import
        else:
            objects.append(value)
    return objects, bad


# ----- one line at a time: a bad line is skipped or has its bad field cut, and says why --------------------------

# Line uuids become the rows' turn ids and keys: at most 128 characters of a plain id, as session ids are.
_UUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
# A UTF-16 surrogate written as a JSON escape (JavaScript writes a lone one when it cuts an emoji in half).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


@dataclass(frozen=True)
class LineProblem:
    """A transcript line that was skipped (`action` "skipped") or imported without a bad field ("cut"). `offset`
    is where the line starts in the transcript, in bytes; `reason` a stable word. Never holds the line's text."""

    offset: int
    reason: str  # not_json, too_deep, not_an_object, uuid_invalid, timestamp_invalid, surrogate, encoding, too_long
    action: str

    def as_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "reason": self.reason, "action": self.action}


def _without_surrogates(value: Any) -> Any:
    """The value with each lone surrogate in its strings (keys too) replaced by U+FFFD; iterative, since the
    value may be deep. Surrogate pairs were joined by the JSON decoder already."""

    def fix(text: str) -> str:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")

    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = fix(item)
        elif isinstance(item, dict):
            fixed = {fix(k) if isinstance(k, str) else k: v for k, v in item.items()}
            container[key] = fixed
            stack.extend((fixed, k) for k in fixed)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
    return root[0]


def parse_line(line: str, offset: int = 0) -> tuple[dict[str, Any] | None, list[LineProblem]]:
    """One transcript line as an object ready for `rows_of`, or None when it must be skipped, with what was wrong.

    Skipped: not JSON, nested past jsondepth.MAX_DEPTH, not an object, a user or assistant line whose uuid is not
    a plain id of at most 128 characters. Cut: a timestamp that is not RFC 3339 (the row is stamped when imported), lone
    surrogates (each becomes U+FFFD)."""
    try:
        value = jsondepth.loads(line)
    except jsondepth.TooDeep:
        return None, [LineProblem(offset, "too_deep", "skipped")]
    except ValueError:  # JSONDecodeError, and a number too long to convert
        return None, [LineProblem(offset, "not_json", "skipped")]
    if not isinstance(value, dict):
        return None, [LineProblem(offset, "not_an_object", "skipped")]
    problems = []
    if _SURROGATE_ESCAPE.search(line):
        fixed = _without_surrogates(value)
        if fixed != value:
            problems.append(LineProblem(offset, "surrogate", "cut"))
            value = fixed
    if value.get("type") in ("user", "assistant"):
        uuid = value.get("uuid")
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            return None, [*problems, LineProblem(offset, "uuid_invalid", "skipped")]
        stamp = value.get("timestamp")
        if stamp is not None:
            try:
                if not isinstance(stamp, str):
                    raise ValueError(stamp)
                parse_timestamp(stamp)
            except ValueError:
                value = {**value, "timestamp": None}
                problems.append(LineProblem(offset, "timestamp_invalid", "cut"))
    return value, problems


@dataclass
class Chunk:
    """The lines read from one piece of a transcript: the objects to map, what was wrong with the others, and the
    offset the next read starts at (the end of the last whole line consumed)."""

    lines: list[dict[str, Any]]
    problems: list[LineProblem]
    next_offset: int
    offsets: list[int] = field(default_factory=list)  # where each of `lines` starts


def parse_chunk(data: bytes, *, start: int, at_end: bool, limit: int) -> Chunk:
    """Whole lines of `data`, read from byte `start` of a transcript. A last line without its newline is taken only
    when the read reached the end of the file and the line is a whole JSON object (the client may be writing it);
    a piece of `limit` bytes with no newline at all is one line longer than a read and is passed over."""
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    lines: list[dict[str, Any]] = []
    offsets: list[int] = []
    problems: list[LineProblem] = []
    if not end and len(data) >= limit:
        return Chunk([], [LineProblem(start, "too_long", "skipped")], start + len(data))
    pieces = data[:end].split(b"\n")[:-1] if end else []
    position = start
    taken_tail = False
    if tail and at_end:
        value, _found = parse_line(tail.decode("utf-8", "replace"), start + end)
        taken_tail = value is not None
        if taken_tail:
            pieces.append(tail)
    for raw in pieces:
        offset, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            problems.append(LineProblem(offset, "encoding", "cut"))
        value, found = parse_line(text, offset)
        problems.extend(found)
        if value is not None:
            lines.append(value)
            offsets.append(offset)
    return Chunk(lines, problems, start + (len(data) if taken_tail else end), offsets)


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
                    rows.append(Row(SessionEventKind.DONE, "", turn, f"done:{turn}", ts))
                turn = uuid
                rows.append(Row(SessionEventKind.USER_MESSAGE, _cut(prompt), turn, f"{uuid}:text", ts))
            for index, block in enumerate(blocks):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    data = {"tool_use_id": block.get("tool_use_id"), "is_error": bool(block.get("is_error"))}
                    rows.append(Row(SessionEventKind.TOOL_RESULT, _cut(_text_of(block.get("content"))), turn,
                                    f"{uuid}:{index}", ts, data))
            continue
        if line.get("isApiErrorMessage"):
            rows.append(Row(SessionEventKind.ERROR, _cut(_text_of(blocks)), turn, f"{uuid}:error", ts))
            continue
        texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        answer = "\n".join(t for t in texts if t.strip())
        if answer:
            rows.append(Row(SessionEventKind.ASSISTANT_MESSAGE, _cut(answer), turn, f"{uuid}:text", ts))
        for index, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                data = {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
                rows.append(Row(SessionEventKind.TOOL_CALL, _cut(str(block.get("name") or "tool")), turn,
                                f"{uuid}:{index}", ts, data))
    return Rows(rows, turn)


# The rows that show the assistant has answered: a turn whose last row is the prompt or a tool's result still
# owes its reply.
ANSWERED_KINDS = frozenset({SessionEventKind.ASSISTANT_MESSAGE, SessionEventKind.TOOL_CALL, SessionEventKind.ERROR})


def answered(rows: Rows, *, before: tuple[str, str] | None = None) -> bool:
    """Whether the last turn's reply is in the rows read: Stop closes a turn only then, so a reply the client has
    not flushed to the transcript yet is never recorded after its turn's `done`. `before`: (turn, kind) of the
    newest row already imported, which decides when this read brought no new row."""
    last = (rows.rows[-1].turn_id, rows.rows[-1].kind) if rows.rows else before
    return last is not None and bool(rows.last_turn) and last[0] == rows.last_turn and last[1] in ANSWERED_KINDS


def turn_end(turn: str) -> Row:
    """The `done` row that closes a turn (the Stop hook: the assistant finished answering)."""
    return Row(SessionEventKind.DONE, "", turn, f"done:{turn}")
