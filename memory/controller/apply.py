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
from memory.store.index_md import HEADER, index_line, render_index, splice_lines

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
        if external:
            files.make_private(path)  # as private as the controller's own files, whatever put it there
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
            _record_applied([decision])
    elif decision.op == Op.DELETE:
        if not external:
            files.remove_file(files.safe_path(root, filename), step=faults.hit)
        with transaction.atomic():
            delete_rows(ref.root_key, [filename])
            if curated:
                update_index_line(ref.root_key, root, filename, None)
            stamps.advance(ref.root_key, before, stamps.root_mtime(root))
            _record_applied([decision])
    else:
        with transaction.atomic():
            _record_applied([decision])


def apply_external(decisions: list[Decision], *, root: Path, documents: dict[str, Document],
                   stats: dict[str, tuple[int, int]]) -> None:
    """Apply the decisions that record files changed outside the controller (origin file or sync), all of one
    root, committed together just before: what `apply_decision(external=True)` does for each, in one transaction
    (the catalog rows, chunks and vectors in batches, MEMORY.md spliced and written once, the events, the
    generation and applied_at), so a pull of a thousand files costs one commit, not a thousand. `documents` are the
    parsed files and `stats` their (size, mtime_ns), from the read the decisions were made from: a file saved again
    since then keeps a row whose size and mtime no longer match, so the next reconcile records that change too.

    A kill anywhere in here rolls the transaction back (MEMORY.md may already be written: replay splices, never
    appends); replay then applies each decision with `apply_decision(external=True)`, which ends in the same
    state."""
    if not decisions:
        return
    first = decisions[0]
    ref = ref_from_row(first.scope, first.workspace_id, first.agent_name, first.agent_tier)
    rows = []
    removed: list[str] = []
    lines: dict[str, str | None] = {}
    for decision in decisions:
        filename = decision.target_filename
        if decision.op in (Op.ADD, Op.UPDATE):
            size, mtime_ns = stats[filename]
            disk = DiskFile(filename, decision.post_content, decision.post_content_hash, size, mtime_ns)
            row = entry_row(ref, disk, documents[filename],
                            hand_edited=decision.origin == Origin.FILE and decision.op == Op.UPDATE)
            rows.append(row)
            line: str | None = index_line(filename, row.name, row.description)
        elif decision.op == Op.DELETE:
            removed.append(filename)
            line = None
        else:
            continue
        if not is_system_path(filename):
            lines[filename] = line
    for row in rows:
        # Git checks a file out with the umask's mode (0644): accepted as memory, it gets the controller's (0600).
        # Before the commit, so a replay after a kill does it again.
        files.make_private(files.safe_path(root, row.filename))
    with transaction.atomic():
        upsert_rows(rows)
        delete_rows(ref.root_key, removed)
        faults.hit("inside_catalog_write")
        update_index_lines(ref.root_key, root, lines)
        _record_applied(decisions)


def _record_applied(decisions: list[Decision]) -> None:
    """The events, the generation and applied_at, in the caller's transaction (with the catalog rows, for a
    mutation). The generation advances after MEMORY.md is written, so a snapshot taken at the new generation
    always sees the new index."""
    faults.hit("after_reindex")
    decision_events_record(decisions)
    if any(decision.op in MUTATING_OPS for decision in decisions):
        advance_generation()
    faults.hit("before_applied")
    stamp_applied(decisions)


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
    update_index_lines(root_key, root, {filename: line})


def update_index_lines(root_key: str, root: Path, lines: dict[str, str | None]) -> None:
    """`update_index_line` for many files: MEMORY.md read, spliced and written once."""
    if not lines:
        return
    path = root / INDEX_FILENAME
    current = files.read_index_text(path)
    text = splice_lines(current, lines) if current is not None else None
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
