"""The conflict noun: a memory file holding git's merge-conflict markers is never memory (health lists it as
invalid, reason `conflict_markers`, and its previous version stays recalled); `conflict_resolve` turns the
operator's choice into controller decisions: keep ours, keep theirs, keep both as two memories, or an edited body.
The conflicted text is the first decision's prior content, so nothing of either side is lost."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from memory.domain.document import (
    Document,
    check_body,
    conflict_marker_line,
    normalize_body,
    parse_document,
    split_conflict,
)
from memory.domain.enums import MemoryType, RequestKind
from memory.domain.errors import DOCUMENT_ERRORS, ValidationError
from memory.domain.models import Candidate, Frontmatter, ScopeRef
from memory.domain.names import memory_filename, parse_filename, validate_filename
from memory.store import files

from .documents import document_missing
from .inputs import Caller, Selector
from .resolution import resolve
from .results import Result, WriteResult
from .scopes import file_ref
from .writes import candidate_submit

Keep = Literal["ours", "theirs", "both", "edit"]


class ResolveInput(Selector):
    filename: str = Field(description="The conflicted memory file, as health lists it (invalid, conflict_markers).")
    keep: Keep = Field(description=(
        "How to resolve: ours (the side before =======), theirs (the side after it), both (ours stays in the "
        "file, theirs becomes a second memory named '<name> (theirs)'), or edit (the body given as content, "
        "under ours' name and description)."))
    content: str | None = Field(default=None, description="The resolved Markdown body; required with keep=edit.")


class ResolveResult(Result):
    filename: str
    keep: Keep
    writes: list[WriteResult]


def _side(text: str, which: str, filename: str) -> Document:
    try:
        return parse_document(text)
    except DOCUMENT_ERRORS as exc:
        reason = str(exc.details.get("reason", "invalid"))
        raise ValidationError(
            f"The {which} side of {filename} is not a valid memory document ({reason}); resolve it with keep=edit.",
            details={"field": "keep", "reason": "side_invalid", "side": which, "problem": reason}) from None


def _candidate(ref: ScopeRef, caller: Caller, document: Document, filename: str, *,
               name: str | None = None) -> Candidate:
    front = document.frontmatter
    memory_type, _slug = parse_filename(filename)
    rebuilt = Frontmatter.build(
        name=name or front.name, description=front.description, type=memory_type or front.type, scope=ref.scope,
        agent=ref.agent_name or None, agent_tier=ref.agent_tier,
        provenance=front.provenance.model_dump() if front.provenance else None)
    return Candidate(ref=ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=rebuilt, body=document.body,
                     target_filename=filename, named_target=True, session_id=caller.session_id)


def _free_filename(root: Path, memory_type: MemoryType, name: str) -> tuple[str, str]:
    for number in range(1, 100):
        candidate_name = f"{name} (theirs)" if number == 1 else f"{name} (theirs {number})"
        filename = memory_filename(memory_type, candidate_name)
        if files.read_bytes(root, filename) is None:
            return candidate_name, filename
    raise ValidationError("No free name is left for theirs.", details={"field": "keep", "reason": "no_free_name"})


def conflict_resolve(*, data: ResolveInput, caller: Caller) -> ResolveResult:
    filename = validate_filename(data.filename)
    resolved = resolve(data, caller)
    ref = file_ref(data, filename, resolved)
    root = resolved.root(ref)
    raw = files.read_bytes(root, filename)
    if raw is None:
        raise document_missing(filename, ref)
    text = raw.decode("utf-8", "replace")
    if conflict_marker_line(text) is None:
        raise ValidationError(f"{filename} holds no merge conflict: edit it as any memory.",
                              details={"field": "filename", "reason": "not_conflicted"})
    if data.keep == "edit" and data.content is None:
        raise ValidationError("keep=edit needs the resolved body as content.",
                              details={"field": "content", "reason": "required"})
    ours_text, theirs_text = split_conflict(text)
    label = f"keep {data.keep}"
    writes: list[WriteResult] = []
    if data.keep == "theirs":
        chosen = _side(theirs_text, "theirs", filename)
    elif data.keep == "edit":
        body = normalize_body(data.content or "")
        check_body(body, resolved.limits)
        try:
            header = parse_document(ours_text).frontmatter
        except DOCUMENT_ERRORS:
            header = _side(theirs_text, "theirs", filename).frontmatter
        chosen = Document(frontmatter=header, body=body)
    else:
        chosen = _side(ours_text, "ours", filename)
    theirs = _side(theirs_text, "theirs", filename) if data.keep == "both" else None
    writes.append(candidate_submit(_candidate(ref, caller, chosen, filename), root=root, config=resolved.config,
                                   resolution=label))
    if theirs is not None:
        memory_type, _slug = parse_filename(filename)
        name, second = _free_filename(root, memory_type or theirs.frontmatter.type, theirs.frontmatter.name)
        writes.append(candidate_submit(_candidate(ref, caller, theirs, second, name=name), root=root,
                                       config=resolved.config, resolution=label))
    return ResolveResult(filename=filename, keep=data.keep, writes=writes)

