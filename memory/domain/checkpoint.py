"""The workspace checkpoint as text (pure Python, no Django).

- its fixed `##` sections, how they are rendered and read back
- the rules that fill them from a transcript projection, with no model
- the section-by-section merge with the previous checkpoint: de-duplicated, capped, newest first
- the shape every provider's answer must have before it may reach the controller

The same input always gives the same bytes: nothing here reads a clock, a random source or the environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .dates import resolve_relative_dates
from .enums import SessionEventKind as Kind
from .extraction import strip_injected
from .scanner import scan
from .text import has_structural_tag, prompt_safe

CHECKPOINT_FILENAME = "project_checkpoint_summary.md"
CHECKPOINT_NAME = "Checkpoint Summary"
CHECKPOINT_DESCRIPTION = "Machine-maintained continuity context for this workspace, updated after each session"

# (key, heading, cap). The cap is how many items the section keeps; the newest are kept.
SECTIONS: tuple[tuple[str, str, int], ...] = (
    ("goal", "Goal", 1),  # the current goal only: an older session's goal is stale once a newer one is set
    ("decisions", "Decisions", 12),
    ("completed", "Completed work", 12),
    ("pending", "Pending asks", 8),
    ("files", "Relevant files", 20),
    ("context", "Critical context (errors, ids, versions, commands)", 15),
)
SECTION_KEYS = tuple(key for key, _heading, _cap in SECTIONS)
CAPS = {key: cap for key, _heading, cap in SECTIONS}
EMPTY_ITEM = "(none yet)"
ITEM_MAX_CHARS = 240

Sections = dict[str, list[str]]

# --- text hygiene -------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"`{3,}|~{3,}")
_BULLET_PREFIX = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#+)\s+")


def clean_item(text: str) -> str | None:
    """One line, no fences, no structural tags, at most ITEM_MAX_CHARS; None when nothing is left or the content
    scanner would refuse it (the checkpoint must never carry what a memory may not)."""
    line = " ".join(_FENCE.sub(" ", text).split())
    line = _BULLET_PREFIX.sub("", line).strip()
    if not line or line == EMPTY_ITEM:
        return None
    line = prompt_safe(line)  # an item can never open or close one of the prompt's `<compozy_…>` blocks
    if len(line) > ITEM_MAX_CHARS:
        line = line[: ITEM_MAX_CHARS - 1].rstrip() + "…"
    if not scan(line).clean:
        return None
    return line


def item_key(item: str) -> str:
    """Two items are the same when their words are."""
    return " ".join(re.findall(r"[^\W_]+", item.lower()))


# --- rendering and reading back -------------------------------------------------------------------------------------


def empty_sections() -> Sections:
    return {key: [] for key in SECTION_KEYS}


def render(sections: Sections) -> str:
    blocks = []
    for key, heading, _cap in SECTIONS:
        items = sections.get(key) or [EMPTY_ITEM]
        blocks.append(f"## {heading}\n" + "\n".join(f"- {item}" for item in items))
    return "\n\n".join(blocks) + "\n"


def parse(body: str) -> Sections:
    """The sections of a checkpoint body. Lenient: a hand-edited file keeps the items under headings it still
    recognises; anything else is left out of the merge rather than failing it."""
    by_heading = {heading.lower(): key for key, heading, _cap in SECTIONS}
    sections = empty_sections()
    current: str | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            current = by_heading.get(line[3:].strip().lower())
            continue
        if current is None or not line.startswith(("- ", "* ")):
            continue
        item = line[2:].strip()
        if item and item != EMPTY_ITEM:
            sections[current].append(item)
    return sections


def shape_problem(text: str, *, max_bytes: int, max_lines: int) -> str | None:
    """Why a generated checkpoint may not be written, or None. Checked on every provider's answer alike."""
    if not text.strip():
        return "empty"
    if _FENCE.search(text):
        return "code_fence"
    if has_structural_tag(text):
        return "structural_tag"
    headings = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
    if headings != [heading for _key, heading, _cap in SECTIONS]:
        return "sections"
    body = text.strip("\n")
    if len(body.encode("utf-8")) > max_bytes or body.count("\n") + 1 > max_lines:
        return "oversized"
    return None


def fit(sections: Sections, *, max_bytes: int, max_lines: int) -> Sections:
    """Drop the oldest item of the fullest section until the rendered body fits the file limits."""
    fitted = {key: list(items) for key, items in sections.items()}
    while True:
        body = render(fitted).strip("\n")
        if len(body.encode("utf-8")) <= max_bytes and body.count("\n") + 1 <= max_lines:
            return fitted
        fullest = max(SECTION_KEYS, key=lambda key: (len(fitted[key]), SECTION_KEYS.index(key)))
        if not fitted[fullest]:
            return fitted  # only headings left: the limits are smaller than the skeleton
        fitted[fullest].pop()


def merge(new: Sections, previous: Sections, *, answered: frozenset[str] = frozenset()) -> Sections:
    """Section by section: this session's items (newest first) ahead of the previous checkpoint's, each item once,
    each section capped. A previous pending ask that this session asked again and got an answer to (`answered`,
    item keys) is pending no more."""
    merged = empty_sections()
    for key in SECTION_KEYS:
        seen: set[str] = set(answered) if key == "pending" else set()
        for item in [*new.get(key, []), *previous.get(key, [])]:
            marker = item_key(item)
            if not marker or marker in seen:
                continue
            seen.add(marker)
            merged[key].append(item)
            if len(merged[key]) >= CAPS[key]:
                break
    return merged


# --- rules: a projection in, sections out -------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One projected event: the fields the rules read."""

    seq: int
    kind: str  # a Kind (SessionEventKind) value as the ledger stored it
    content: str
    data: dict[str, Any]

    @classmethod
    def of(cls, item: dict[str, Any]) -> Message:
        # Compozy's own injected blocks (a <compozy_memory> section a client put in the first user message) are
        # never what happened in the session: the same stripping the extractor applies.
        # Relative dates read against the event's own time ("yesterday" said a month ago is that day's yesterday),
        # as the extractor reads them: the checkpoint is read sessions later.
        content = strip_injected(str(item.get("content") or ""))
        said = str(item.get("ts") or "")
        if said:
            content = resolve_relative_dates(content, datetime.fromisoformat(said.replace("Z", "+00:00")))
        return cls(int(item["seq"]), str(item["kind"]), content, dict(item.get("data") or {}))


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_DECISION = re.compile(
    r"\b(decided|decide to|decision|we(?:'ll| will) (?:use|go with|keep|switch)|let'?s (?:use|go with|keep|switch)"
    r"|going with|chose|choose to|settled on|agreed (?:to|on)|instead of|switch(?:ed|ing)? to|prefer(?:red)? to"
    r"|from now on|must always|must never|should always|should never)\b",
    re.IGNORECASE,
)
_COMPLETED = re.compile(
    r"^(?:i(?:'ve| have)?\s+|we(?:'ve| have)?\s+|now\s+|done[:,]?\s+)?"
    r"(added|fixed|implemented|created|updated|removed|deleted|renamed|refactored|wrote|rewrote|moved|merged"
    r"|migrated|replaced|installed|configured|extracted|split|finished|completed|landed|shipped|resolved|cleaned"
    r"|documented|tested)\b"
    r"|\b(all|the) tests? (now )?pass(es|ed)?\b|\bis (now )?(done|fixed|complete|working)\b",
    re.IGNORECASE,
)
_ERROR = re.compile(r"\b(traceback|exception|error|errno|failed|failure|fatal|panic|segfault|exit code [1-9])\b",
                    re.IGNORECASE)
_VERSION = re.compile(r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bversion \d+(?:\.\d+)*\b", re.IGNORECASE)
_IDENTIFIER = re.compile(
    r"\b[0-9A-HJKMNP-TV-Z]{26}\b"  # ULID
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"  # UUID
    r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"  # ticket keys such as ABC-123
    r"|(?i:\b(?:PR|issue|pull request)\s*#\d+\b|\bcommit\s+[0-9a-f]{7,40}\b)"
)
_PATH = re.compile(r"(?<![\w/.@:-])(?:\.{1,2}/|/|~/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,7}\b"
                   r"|(?<![\w/.@:-])[\w-]+\.(?:py|md|toml|json|ya?ml|ts|tsx|js|jsx|rs|go|java|rb|sh|sql|html|css"
                   r"|cfg|ini|txt|lock)\b")
_PATH_KEYS = ("file_path", "path", "notebook_path")
_URL = re.compile(r"\bhttps?://\S+")


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_SPLIT.split(text) if part and part.strip()]


def _first_sentence(text: str) -> str:
    parts = _sentences(text)
    return parts[0] if parts else ""


class _Cleaner:
    """clean_item for one build: a projection repeats texts (the same path in many tool calls, the same command,
    an ask quoted again), and the content scanner, the costly part, need see each of them once."""

    def __init__(self) -> None:
        self._seen: dict[str, str | None] = {}

    def __call__(self, text: str) -> str | None:
        if text not in self._seen:
            self._seen[text] = clean_item(text)
        return self._seen[text]

    def add(self, bucket: list[str], text: str) -> None:
        item = self(text)
        if item is not None:
            bucket.append(item)


def _paths(text: str) -> Iterable[str]:
    for match in _PATH.finditer(_URL.sub(" ", text)):
        path = match.group(0).rstrip(".,:;)")
        if not re.fullmatch(r"v?\d+(\.\d+)+", path):  # a version number is not a file
            yield path


def _tool_paths(message: Message) -> Iterable[str]:
    tool_input = message.data.get("input")
    if isinstance(tool_input, dict):
        for key in _PATH_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value.strip():
                yield value.strip()


def _command(message: Message) -> str | None:
    tool_input = message.data.get("input")
    if isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        first = tool_input["command"].strip().splitlines()
        return first[0] if first else None
    return None


# A sentence labelled as done, decided or still to do: how a coding session reports its own progress.
_DONE_LABEL = re.compile(r"^(?:fixed|done|completed|finished|resolved|shipped|implemented)\s*:", re.IGNORECASE)
_PENDING_LABEL = re.compile(r"\b(?:still pending|pending|todo(?: for later)?|to-do|next steps?|left to do"
                            r"|remaining|follow[- ]up)\s*:\s*\S", re.IGNORECASE)
# A standing rule the user states ("pnpm only", "always run the linter", "never push to main").
_RULE = re.compile(r"^[\w.@/+-]+(?: [\w.@/+-]+)? only\b|^(?:always|never|don'?t|do not)\b", re.IGNORECASE)
_EMPHASIS = re.compile(r"\*\*|__")
# Words of a sentence that asks for nothing: a greeting or an acknowledgement is never the session's goal.
_ACK_WORDS = frozenset(re.findall(r"\S+", "hi hello hey there thanks thank you thx ok okay great cool nice perfect "
                                  "awesome good yes yep yeah sure agreed lgtm that works it looks sounds fine so much "
                                  "very all right morning"))
# Path parts that are never the workspace's own files, even under it: dependencies, caches, build output.
_NOT_SOURCE = frozenset({"node_modules", ".cache", "site-packages", "dist-packages", "__pycache__", ".git", ".venv",
                         "venv", ".tox", ".mypy_cache", ".pytest_cache", ".next", ".compozy"})


def _is_ack(sentence: str) -> bool:
    words = re.findall(r"[a-z']+", sentence.lower())
    return not words or all(word in _ACK_WORDS for word in words)


def _goal(text: str) -> str | None:
    """The request a user message makes: its first sentence that is not a greeting, a thank-you, a question about
    something else or a note for later."""
    for sentence in _sentences(text):
        if not _is_ack(sentence) and not _PENDING_LABEL.search(sentence):
            return sentence
    return None


def workspace_file(path: str, workspace: Iterable[str] = ()) -> str | None:
    """The path as the workspace names it (relative to its root), or None when it is not one of the workspace's own
    files: outside it (a cache such as ~/.cache/ms-playwright, a /tmp log, a system library), or a dependency or
    cache directory under it. `workspace` lists the directory's names (as given and resolved)."""
    path = path.strip()
    for root in (root.rstrip("/") for root in workspace if root.strip("/")):
        if path.startswith(root + "/"):
            path = path[len(root) + 1:]
            break
    else:
        if path.startswith(("/", "~", "file:")):
            return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or any(part in _NOT_SOURCE or part == ".." for part in parts):
        return None
    return "/".join(parts)


def extract(messages: Iterable[dict[str, Any]], cleaner: _Cleaner | None = None, *,
            workspace: Iterable[str] = ()) -> Sections:
    """Sections for one projection, each item in the order it happened (the merge puts the newest first)."""
    projected = [Message.of(item) for item in messages]
    add = (cleaner or _Cleaner()).add
    sections = empty_sections()
    workspace = tuple(workspace)
    last_answer = max((m.seq for m in projected if m.kind == Kind.ASSISTANT_MESSAGE), default=0)
    goal = None
    for message in projected:
        text = _EMPHASIS.sub("", message.content)
        if message.kind == Kind.USER_MESSAGE:
            goal = _goal(text) or goal  # the latest request is the session's current goal
            if message.seq > last_answer:
                add(sections["pending"], _first_sentence(text) or text)
        if message.kind in (Kind.USER_MESSAGE, Kind.ASSISTANT_MESSAGE):
            for sentence in _sentences(text):
                if sentence.endswith("?"):
                    continue  # a question decides nothing and completes nothing
                bare = _BULLET_PREFIX.sub("", sentence)
                if _PENDING_LABEL.search(bare):
                    add(sections["pending"], bare[_PENDING_LABEL.search(bare).start():])
                elif message.kind == Kind.ASSISTANT_MESSAGE and _DONE_LABEL.match(bare):
                    add(sections["completed"], bare)
                elif _DECISION.search(sentence) or (message.kind == Kind.USER_MESSAGE and _RULE.search(bare)):
                    add(sections["decisions"], sentence)
                elif message.kind == Kind.ASSISTANT_MESSAGE and _COMPLETED.search(bare):
                    add(sections["completed"], sentence)
        # Files come from what the session touched (tool inputs) and what people named in their messages, never
        # from tool output or error text (stack frames, cache paths, temp logs).
        named = [*_tool_paths(message)]
        if message.kind in (Kind.USER_MESSAGE, Kind.ASSISTANT_MESSAGE):
            named += _paths(text)
        for path in named:
            relative = workspace_file(path, workspace)
            if relative is not None:
                add(sections["files"], relative)
        if message.kind == Kind.TOOL_CALL:
            command = _command(message)
            if command:
                add(sections["context"], f"Command: {command}")
        is_error = message.kind == Kind.ERROR or (message.kind == Kind.TOOL_RESULT and message.data.get("is_error"))
        if is_error:
            add(sections["context"], f"Error: {_first_line(text)}")
        elif message.kind in (Kind.TOOL_RESULT, Kind.ASSISTANT_MESSAGE, Kind.USER_MESSAGE):
            for sentence in _sentences(text):
                if message.kind == Kind.TOOL_RESULT and _ERROR.search(sentence):
                    add(sections["context"], f"Error: {sentence}")
                elif _VERSION.search(sentence) or _IDENTIFIER.search(sentence):
                    add(sections["context"], sentence)
    if goal:
        add(sections["goal"], goal)
    return {key: _unique(items) for key, items in sections.items()}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for item in items:
        marker = item_key(item)
        if marker and marker not in seen:
            seen.add(marker)
            kept.append(item)
    return kept


def answered_asks(messages: Iterable[dict[str, Any]], cleaner: _Cleaner | None = None) -> frozenset[str]:
    """Item keys of the user asks in a projection that an assistant message came after."""
    clean = cleaner or clean_item
    projected = [Message.of(item) for item in messages]
    last_answer = max((m.seq for m in projected if m.kind == Kind.ASSISTANT_MESSAGE), default=0)
    asks = (m for m in projected if m.kind == Kind.USER_MESSAGE and m.seq < last_answer)
    return frozenset(item_key(clean(_first_sentence(m.content) or m.content) or "") for m in asks) - {""}


def newest_first(sections: Sections) -> Sections:
    return {key: list(reversed(items)) for key, items in sections.items()}


def build(messages: list[dict[str, Any]], previous_body: str, *, max_bytes: int, max_lines: int,
          workspace: Iterable[str] = ()) -> str:
    """The local rules end to end: extract this projection, merge it over the previous checkpoint, fit, render.
    `workspace` names the workspace's directory: files are named relative to it, files outside it are left out."""
    cleaner = _Cleaner()
    new = newest_first(extract(messages, cleaner, workspace=workspace))
    merged = merge(new, parse(previous_body), answered=answered_asks(messages, cleaner))
    return render(fit(merged, max_bytes=max_bytes, max_lines=max_lines))
