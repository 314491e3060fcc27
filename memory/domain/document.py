"""Memory documents as text: strict parsing, deterministic rendering, body limits."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import frontmatter as frontmatter_lib
import yaml
from pydantic import ValidationError as PydanticValidationError

from .errors import ValidationError
from .models import Frontmatter, translate_pydantic_error
from .names import document_kind
from .text import hidden_characters

_FRONTMATTER_START = re.compile(r"\A---[ \t]*\r?\n")


# YAML scalars that may be written plain: they read back as the same string. Anything else (a leading indicator
# character, ": " or " #", a word YAML would read as a bool, null or number) is written double-quoted with JSON
# escapes, which YAML reads back exactly.
_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9_(][^\x00-\x1f\x7f:#\"'\\`{}\[\]|>&*!%@,]*$")
_YAML_RESERVED = re.compile(
    r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL|~"
    r"|[-+]?(\.[0-9]+|[0-9][0-9_]*)(\.[0-9_]*)?([eE][-+]?[0-9]+)?|0x[0-9a-fA-F_]+|0o?[0-7_]+"
    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}.*|[0-9]+(:[0-9]+)+(\.[0-9]*)?)$"
)
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")


def _scalar(value: Any, *, timestamp: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if timestamp and _TIMESTAMP.match(text):
        return text  # a plain timestamp, as the spec's example files show
    if _PLAIN_SAFE.match(text) and not _YAML_RESERVED.match(text) and text == text.strip():
        return text
    return json.dumps(text, ensure_ascii=False)


def _emit(data: dict[str, Any], indent: str, lines: list[str]) -> None:
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            _emit(value, indent + "  ", lines)
        elif isinstance(value, list):
            if not value:
                lines.append(f"{indent}{key}: []")
                continue
            lines.append(f"{indent}{key}:")
            lines.extend(f"{indent}  - {_scalar(item)}" for item in value)
        else:
            lines.append(f"{indent}{key}: {_scalar(value, timestamp=key.endswith('_at'))}")


def dump_yaml(data: dict[str, Any]) -> str:
    """Deterministic block YAML for frontmatter's small, known shape (mappings, lists of scalars, scalars)."""
    lines: list[str] = []
    _emit(data, "", lines)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Limits:
    max_lines: int
    max_bytes: int


@dataclass(frozen=True)
class Document:
    frontmatter: Frontmatter
    body: str


def normalize_body(text: str) -> str:
    """Line endings to \\n, no trailing spaces on the final line, no leading or trailing blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(line.rstrip() for line in lines)


def body_fingerprint(body: str) -> str:
    """The exact-duplicate key: lowercased with whitespace collapsed."""
    return " ".join(body.lower().split())


# Git's merge-conflict markers: `<<<<<<< ours`, optionally `||||||| base` (diff3), `=======`, `>>>>>>> theirs`, each
# at the start of a line. All three of start, separator and end must appear in that order: a lone `=======` is a
# Markdown heading underline, not a conflict.
CONFLICT_REASON = "conflict_markers"
_CONFLICT_START = re.compile(r"^<{7}(?: |$)")
_CONFLICT_SEPARATOR = re.compile(r"^={7}$")
_CONFLICT_END = re.compile(r"^>{7}(?: |$)")


def conflict_marker_line(text: str) -> int | None:
    """The 1-based line of the first merge-conflict start marker that has its separator and end after it."""
    start = separator = None
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if _CONFLICT_START.match(line):
            if start is None:
                start = number
        elif start is not None and _CONFLICT_SEPARATOR.match(line):
            separator = number
        elif separator is not None and _CONFLICT_END.match(line):
            return start
    return None


_CONFLICT_BASE = re.compile(r"^\|{7}(?: |$)")


def split_conflict(text: str) -> tuple[str, str]:
    """The two sides of a conflicted file, (ours, theirs): the lines outside the conflicts are in both, each
    conflict's first part goes to ours and its last to theirs (a diff3 base section goes to neither)."""
    ours: list[str] = []
    theirs: list[str] = []
    state = "both"
    for line in text.split("\n"):
        bare = line.rstrip("\r")
        if state == "both" and _CONFLICT_START.match(bare):
            state = "ours"
        elif state == "ours" and _CONFLICT_BASE.match(bare):
            state = "base"
        elif state in ("ours", "base") and _CONFLICT_SEPARATOR.match(bare):
            state = "theirs"
        elif state == "theirs" and _CONFLICT_END.match(bare):
            state = "both"
        elif state == "both":
            ours.append(line)
            theirs.append(line)
        elif state == "ours":
            ours.append(line)
        elif state == "theirs":
            theirs.append(line)
    return "\n".join(ours), "\n".join(theirs)


def conflict_refused(line: int, *, field: str | None = None) -> ValidationError:
    details: dict[str, Any] = {"reason": CONFLICT_REASON, "line": line}
    if field:
        details["field"] = field
    return ValidationError(
        f"The text holds git merge-conflict markers (line {line}): a conflict is never memory. Resolve it with "
        "`compozy memory resolve`, or edit the file and remove the markers.", details=details)


def check_body(body: str, limits: Limits, *, allow_empty: bool = False) -> None:
    marker = conflict_marker_line(body)
    if marker is not None:
        raise conflict_refused(marker, field="content")
    if not body.strip():
        if allow_empty:
            return
        raise ValidationError("The memory body is empty.", details={"field": "content", "reason": "empty"})
    line_count = body.count("\n") + 1
    byte_count = len(body.encode("utf-8"))
    if line_count > limits.max_lines or byte_count > limits.max_bytes:
        raise ValidationError(
            f"The memory body is too large: {line_count} lines and {byte_count} bytes, "
            f"the limits are {limits.max_lines} lines and {limits.max_bytes} bytes.",
            details={
                "field": "content",
                "reason": "too_large",
                "lines": line_count,
                "bytes": byte_count,
                "max_lines": limits.max_lines,
                "max_bytes": limits.max_bytes,
            },
        )


def check_hand_edit(document: Document, limits: Limits) -> None:
    """A file written outside the controller is held to what a controller write is held to before it may be indexed:
    the body's size caps, and no hidden characters (memory.domain.text.hidden_characters) in its name, description
    or body, which could hide a tag or an instruction from whoever reads the file."""
    check_body(document.body, limits, allow_empty=True)
    front = document.frontmatter
    if any(hidden_characters(text) for text in (front.name, front.description, document.body)):
        raise ValidationError("The file holds invisible format, tag or bidirectional characters.",
                              details={"field": "content", "reason": "invisible_character"})


def decode_utf8(raw: bytes, *, field: str = "content") -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            "The input is not valid UTF-8.", details={"field": field, "reason": "encoding", "offset": exc.start}
        ) from None


def split_frontmatter(text: str) -> tuple[dict[str, Any] | None, str]:
    """Return (metadata or None when the text has no frontmatter block, body). Broken YAML raises."""
    if not _FRONTMATTER_START.match(text):
        return None, text
    try:
        metadata, body = frontmatter_lib.parse(text)
    except yaml.YAMLError as exc:
        raise ValidationError(
            "The frontmatter is not valid YAML.", details={"reason": "yaml", "problem": str(exc).splitlines()[0]}
        ) from None
    if not isinstance(metadata, dict):
        raise ValidationError("The frontmatter must be a mapping.", details={"reason": "yaml"})
    return metadata, body


def parse_document(text: str, *, filename: str | None = None) -> Document:
    """A document's frontmatter and body. With its `filename`, the type the name declares (`user_x.md`) must be
    the frontmatter's: a hand edit that changes one and not the other is invalid, like broken YAML."""
    # Before the YAML: a conflict inside the frontmatter may still parse, and one in the body always would.
    marker = conflict_marker_line(text)
    if marker is not None:
        raise conflict_refused(marker)
    metadata, body = split_frontmatter(text)
    if metadata is None or not metadata:
        raise ValidationError("The file has no YAML frontmatter.", details={"reason": "missing_frontmatter"})
    try:
        front = Frontmatter.model_validate(metadata)
    except PydanticValidationError as exc:
        raise translate_pydantic_error(exc) from None
    if filename is not None:
        check_filename_type(filename, front.type.value)
    return Document(frontmatter=front, body=normalize_body(body))


def check_filename_type(filename: str, memory_type: str) -> None:
    """A curated memory's filename starts with its type: `user_x.md` holds a memory of type user, never project.
    Ad-hoc notes (`ad_hoc_…`) carry any type."""
    declared = document_kind(filename)
    if declared not in (None, "ad_hoc") and declared != memory_type:
        raise ValidationError(f"{filename} is named for type {declared}, but its type is {memory_type}: the "
                              "filename prefix must match the type.",
                              details={"field": "type", "filename": filename, "reason": "type_mismatch",
                                       "filename_type": declared, "type": memory_type})


def render_document(front: Frontmatter, body: str) -> str:
    return f"---\n{dump_yaml(front.yaml_dict())}---\n\n{body}\n"
