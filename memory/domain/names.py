"""Slugs and filenames. Every filename is validated here before anything touches the disk."""

from __future__ import annotations

import re
from datetime import datetime

from anyascii import anyascii

from .enums import MemoryType
from .errors import ValidationError

INDEX_FILENAME = "MEMORY.md"
SYSTEM_DIR = "_system"
AD_HOC_PREFIX = "ad_hoc_"

_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_ALLOWED = re.compile(r"^[a-z0-9_.-]+$")
_AGENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_TYPED = re.compile(r"^(user|feedback|project|reference)_([a-z0-9_.-]+)\.md$")
_AD_HOC = re.compile(r"^ad_hoc_(\d{8}T\d{6}Z)_([a-z0-9_.-]+)\.md$")
MAX_FILENAME_LENGTH = 200
# Session ids are stored in 128-character columns and printed in logs and pages.
MAX_SESSION_ID_LENGTH = 128
# A session the ledger records (`session start`, a snapshot for a session, a hook's session): its id names a row,
# a page of the inspector and a directory under _inbox/, so it is one path segment of safe characters.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
SESSION_ID_RULE = "1 to 128 letters, digits and . _ : @ -, starting with a letter or digit"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def validate_session_id(value: str, *, field: str = "session_id") -> str:
    """The one rule for a session id, however it arrives (`--session`, $COMPOZY_SESSION_ID, `X-Compozy-Session`, a
    hook payload, an input field): SESSION_ID_PATTERN. A header or an environment variable is checked by no input
    model, and the id is stored in decisions and provenance and names a directory under _inbox/, so a path
    (`../../x`), markup (`<script>`) or a control character is refused before anything records it."""
    if len(value) > MAX_SESSION_ID_LENGTH:
        raise ValidationError(f"The {field} is longer than {MAX_SESSION_ID_LENGTH} characters.",
                              details={"field": field, "reason": "too_long", "max_length": MAX_SESSION_ID_LENGTH})
    if not value.isprintable():
        raise ValidationError(f"The {field} holds a control character.",
                              details={"field": field, "reason": "control_character"})
    if not _SESSION_ID.match(value):
        raise ValidationError(f"The {field} must be {SESSION_ID_RULE}.",
                              details={"field": field, "reason": "pattern", "rule": SESSION_ID_RULE})
    return value


def slugify(text: str) -> str:
    """ASCII-transliterated, lowercased, with every run of characters outside [a-z0-9] turned into `_`.

    Filenames stay within [a-z0-9_.-] (portable on every filesystem and safe in a shell), so names in other
    scripts are transliterated, not dropped: `数据库迁移` → `shujukuqianyi`, `Привет мир` → `privet_mir`,
    `Café` → `cafe`. anyascii is deterministic for a given version, which pyproject.toml pins exactly."""
    slug = _SLUG_RUN.sub("_", anyascii(text).lower()).strip("_")
    if not slug:
        raise ValidationError(
            "The name has no letters or digits to build a filename from.",
            details={"field": "name", "reason": "empty_slug"},
        )
    return slug[:120].rstrip("_")


def memory_filename(memory_type: MemoryType, name: str) -> str:
    return f"{memory_type.value}_{slugify(name)}.md"


def ad_hoc_filename(when: datetime, title: str) -> str:
    return f"{AD_HOC_PREFIX}{when.strftime('%Y%m%dT%H%M%SZ')}_{slugify(title)}.md"


def validate_filename(filename: str, *, include_system: bool = False) -> str:
    """Reject anything that could escape a memory root or name a reserved artifact.

    With include_system, a path under `_system/` is allowed for reading (operators browse artifacts explicitly);
    each of its segments is still held to the same character set.
    """
    details = {"field": "filename", "filename": filename}
    if not filename or len(filename) > MAX_FILENAME_LENGTH:
        raise ValidationError("The filename is empty or too long.", details={**details, "reason": "length"})
    if "\x00" in filename or "\\" in filename:
        raise ValidationError("The filename holds a forbidden character.", details={**details, "reason": "charset"})
    if ".." in filename:
        raise ValidationError("The filename may not contain '..'.", details={**details, "reason": "traversal"})
    segments = filename.split("/")
    if len(segments) > 1:
        if not (include_system and segments[0] == SYSTEM_DIR and all(segments[1:])):
            raise ValidationError(
                "The filename may not contain a path separator.", details={**details, "reason": "separator"}
            )
    elif filename.startswith(SYSTEM_DIR):
        raise ValidationError(
            "Filenames starting with '_system' are reserved for machine-managed artifacts.",
            details={**details, "reason": "reserved"},
        )
    for segment in segments:
        if not _ALLOWED.match(segment) or segment.startswith("."):
            raise ValidationError(
                "The filename may only use the characters a-z, 0-9, '_', '.' and '-'.",
                details={**details, "reason": "charset"},
            )
    if not filename.endswith(".md"):
        raise ValidationError("Memory filenames end in '.md'.", details={**details, "reason": "extension"})
    return filename


def is_system_path(filename: str) -> bool:
    return filename.startswith(SYSTEM_DIR + "/")


def parse_filename(filename: str) -> tuple[MemoryType | None, str]:
    """Return (type, slug) for a curated filename, or (None, slug) for an ad-hoc note."""
    base = filename.rsplit("/", 1)[-1]
    match = _TYPED.match(base)
    if match:
        return MemoryType(match.group(1)), match.group(2)
    match = _AD_HOC.match(base)
    if match:
        return None, match.group(2)
    raise ValidationError(
        "Memory filenames look like '<type>_<slug>.md' with type user, feedback, project or reference.",
        details={"field": "filename", "filename": filename, "reason": "pattern"},
    )


def document_kind(filename: str) -> str | None:
    """The memory type a document's name declares, "ad_hoc" for an ad-hoc note, None for any other name."""
    base = filename.rsplit("/", 1)[-1]
    match = _TYPED.match(base)
    if match:
        return match.group(1)
    return "ad_hoc" if _AD_HOC.match(base) else None


def is_memory_document_name(filename: str) -> bool:
    return document_kind(filename) is not None


def entity_key(slug: str) -> str:
    """The entity slot of a memory: its slug's words, order-free, so `docs_runtime` and `runtime_docs` meet."""
    return "_".join(sorted(word for word in slug.replace(".", "_").replace("-", "_").split("_") if word))


def validate_agent_name(agent: str) -> str:
    from .errors import ScopeInvalid

    if not _AGENT.match(agent or ""):
        raise ScopeInvalid(
            "Agent names use 1 to 64 characters from a-z, 0-9, '_' and '-', starting with a letter or digit.",
            details={"field": "agent_name", "reason": "agent_invalid"},
        )
    return agent
