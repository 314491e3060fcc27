"""Applying a decision: the file mutation, then one transaction holding the catalog rows, MEMORY.md's line (a file
write made while the transaction is open), the event, the generation and applied_at. Every step is idempotent, so
this is also the replay path.

One commit per applied decision, not two: the catalog rows and the event were committed apart until session 6,
which cost a commit and the pages both transactions touch (each B-tree a commit touches is at least one WAL page)."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import transaction

from memory.catalog.indexer import (
    DiskFile,
    advance_generation,
    delete_rows,
    entry_row,
    index_entries,
    upsert_rows,
)
from memory.domain.document import Document, parse_document
from memory.domain.enums import MUTATING_OPS, Op, Origin
from memory.domain.models import sha256_text
from memory.domain.names import INDEX_FILENAME, is_system_path
from memory.models import Decision
from memory.store import files
from memory.store.index_md import HEADER, index_line, render_index, splice_index

from . import faults, stamps
from .decision_log import stamp_applied
from .events import decision_events_record
from .roots import ref_from_row


def _file_matches(path: Path, text: str, digest: str) -> bool:
    found = files.read_path(path, path.name)
    if found is None or found[1].st_size != len(text.encode("utf-8")):
        return False
    return sha256_text(found[0].decode("utf-8", "replace")) == digest


def apply_decision(decision: Decision, *, root: Path, document: Document | None = None,
                   replaying: bool = False, external: bool = False, reserved: Path | None = None,
                   mtime_before: int | None = None) -> None:
    """`replaying`: the decision may have partly landed before a crash. `external`: the file was put there by
    hand, so an older MEMORY.md may already list it, and the file is the person's: it is never written or removed
    here, even when it changed again since it was read (the next reconcile records that change). `reserved`: the
    temp file already holding the post content (written before the decision was committed), renamed into place;
    `mtime_before`: the root directory's mtime before that temp file was created (else read here)."""
    ref = ref_from_row(decision.scope, decision.workspace_id, decision.agent_name, decision.agent_tier)
    filename = decision.target_filename
    curated = not is_system_path(filename)
    # The directory's mtime before this write: the freshness stamp follows the controller's own change (a file
    # the person put there is reconciled, and stamped, by freshness itself).
    before = None if external else (mtime_before if mtime_before is not None else stamps.root_mtime(root))
    if decision.op in (Op.ADD, Op.UPDATE):
        path = files.safe_path(root, filename)
        matches = _file_matches(path, decision.post_content, decision.post_content_hash)
        if not matches and not external:
            if reserved is not None:
                files.commit_reserved(reserved, path, step=faults.hit)
            else:
                if not root.is_dir():
                    files.make_scope_dirs(root, with_inbox=ref.scope.value == "global")
                files.atomic_write(path, decision.post_content, step=faults.hit)
        elif reserved is not None:
            files.discard_reserved(reserved)
        if matches or not external:
            stat = os.lstat(path)
            size, mtime_ns = stat.st_size, stat.st_mtime_ns
        else:
            # Saved again (or removed) since it was read: the row keeps what was decided, with a size and mtime
            # no file has, so the next reconcile sees the file as changed and records it.
            size, mtime_ns = -1, 0
        disk = DiskFile(filename, decision.post_content, decision.post_content_hash, size, mtime_ns)
        row = entry_row(ref, disk, document or parse_document(decision.post_content),
                        hand_edited=decision.origin == Origin.FILE and decision.op == Op.UPDATE)
        with transaction.atomic():
            previous = upsert_rows([row])[0]
            # A kill here loses the rows, chunks and vectors together; replay writes them again.
            faults.hit("inside_catalog_write")
            if curated:
                line = index_line(filename, row.name, row.description)
                # Inside the transaction, so the rows, the event and applied_at commit once (one commit a write,
                # not two). A kill after MEMORY.md is written but before the commit leaves the line without its
                # row; a replay therefore always splices the line (a no-op when it is there) instead of appending.
                if previous is None and not external and not replaying:
                    append_index_line(ref.root_key, root, line)
                elif replaying or external or previous != (row.name, row.description):
                    update_index_line(ref.root_key, root, filename, line)
            stamps.advance(ref.root_key, before, stamps.root_mtime(root))
            _record_applied(decision)
    elif decision.op == Op.DELETE:
        if not external:
            files.remove_file(files.safe_path(root, filename), step=faults.hit)
        with transaction.atomic():
            delete_rows(ref.root_key, [filename])
            if curated:
                update_index_line(ref.root_key, root, filename, None)
            stamps.advance(ref.root_key, before, stamps.root_mtime(root))
            _record_applied(decision)
    else:
        with transaction.atomic():
            _record_applied(decision)


def _record_applied(decision: Decision) -> None:
    """The event, the generation and applied_at, in the caller's transaction (with the catalog rows, for a
    mutation). The generation advances after MEMORY.md is written, so a snapshot taken at the new generation
    always sees the new index."""
    faults.hit("after_reindex")
    decision_events_record([decision])
    if decision.op in MUTATING_OPS:
        advance_generation()
    faults.hit("before_applied")
    stamp_applied([decision])


def append_index_line(root_key: str, root: Path, line: str) -> None:
    """A new memory's line goes at the end of MEMORY.md: constant cost however large the root is."""
    path = root / INDEX_FILENAME
    found = files.read_tail(path, len(HEADER.encode()) + 1)
    if found is None or not found[1].endswith(b"\n"):
        render_memory_index(root_key, root)  # missing, a link, or a torn append: render it whole
        return
    size, tail = found
    is_bare_header = tail == HEADER.encode() and size == len(HEADER.encode())
    # The bare header has no blank line after it yet; see render_index. A link swapped in since the tail was
    # read is not appended through (O_NOFOLLOW): the index is rendered whole over it instead.
    if not files.append_durably(path, ("\n" if is_bare_header else "") + line + "\n"):
        render_memory_index(root_key, root)


def update_index_line(root_key: str, root: Path, filename: str, line: str | None) -> None:
    """Change, remove (line None) or make sure of one file's line; render the index whole when it is missing or
    not in the rendered form."""
    path = root / INDEX_FILENAME
    current = files.read_index_text(path)
    text = splice_index(current, filename, line) if current is not None else None
    if text is None:
        render_memory_index(root_key, root)
    elif text != current:
        files.atomic_write(path, text)


def render_memory_index(root_key: str, root: Path) -> None:
    """Render MEMORY.md whole from the catalog (reindex, repair)."""
    text = render_index(index_entries(root_key))
    path = root / INDEX_FILENAME
    if files.read_index_text(path) == text:
        return  # read_index_text never reads through a link, so a linked index is always replaced
    if root.is_dir() or text != render_index([]):
        files.atomic_write(path, text)
