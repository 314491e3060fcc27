"""The one selector for a memory file: read it from its root, decode it, parse it. Every service that starts
from the file on disk (show, edit, promote, propose) reads it here, so a missing file, bad bytes and a broken
document fail the same way everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memory.domain.document import Document, parse_document
from memory.domain.errors import NotFound
from memory.domain.models import ScopeRef
from memory.store import files


@dataclass(frozen=True)
class StoredDocument:
    text: str
    size: int  # bytes on disk
    mtime_ns: int  # from the descriptor that was read (never through a symlink)
    document: Document


def document_find(root: Path, filename: str) -> StoredDocument | None:
    """The parsed file, or None when there is none. Bytes that are not UTF-8 are a Conflict (409, reason
    `encoding`: the disk, not the request, is wrong); a file that is not a valid memory document raises the
    parser's error."""
    found = files.read_file(root, filename)
    if found is None:
        return None
    raw, stat = found
    text = files.decode_stored(raw, filename)
    return StoredDocument(text, len(raw), stat.st_mtime_ns, parse_document(text))


def document_get(root: Path, filename: str, ref: ScopeRef) -> StoredDocument:
    """As document_find; a missing file is NotFound in the ref's scope."""
    found = document_find(root, filename)
    if found is None:
        raise document_missing(filename, ref)
    return found


def document_missing(filename: str, ref: ScopeRef) -> NotFound:
    """The one error for a memory that is not there, whichever verb asked."""
    return NotFound(f"No memory {filename} in {ref.label} scope.", details={"filename": filename, "scope": ref.label})
