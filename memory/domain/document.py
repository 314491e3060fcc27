"""Memory documents as text: strict parsing, deterministic rendering, body limits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import frontmatter as frontmatter_lib
import yaml
from pydantic import ValidationError as PydanticValidationError

from .errors import ValidationError
from .models import Frontmatter, translate_pydantic_error

_FRONTMATTER_START = re.compile(r"\A---[ \t]*\r?\n")


class _Timestamp(str):
    """A string YAML should write as a plain timestamp scalar, as the spec's example files show."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as the spec's example files do.
        return super().increase_indent(flow, False)


_Dumper.add_representer(_Timestamp, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:timestamp", value))


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


def check_body(body: str, limits: Limits, *, allow_empty: bool = False) -> None:
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


def parse_document(text: str) -> Document:
    metadata, body = split_frontmatter(text)
    if metadata is None or not metadata:
        raise ValidationError("The file has no YAML frontmatter.", details={"reason": "missing_frontmatter"})
    try:
        front = Frontmatter.model_validate(metadata)
    except PydanticValidationError as exc:
        raise translate_pydantic_error(exc) from None
    return Document(frontmatter=front, body=normalize_body(body))


def render_document(front: Frontmatter, body: str) -> str:
    data = front.yaml_dict()
    provenance = data.get("provenance")
    if provenance:
        for key in ("created_at", "updated_at"):
            if key in provenance:
                provenance[key] = _Timestamp(provenance[key])
    header = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{header}---\n\n{body}\n"
