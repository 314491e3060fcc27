"""Agent writes: `compozy__memory_propose` (a single write, or an atomic batch of body operations on one document)
and `compozy__memory_note`. Both go through the controller with origin `tool`; a sub-agent may not write."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memory.controller.core import previous_decision
from memory.controller.events import event_record
from memory.domain.document import check_body, check_filename_type, normalize_body
from memory.domain.enums import EventOp, MemoryType, Origin, RequestKind, Scope
from memory.domain.errors import Rejected, ValidationError
from memory.domain.models import Candidate, Frontmatter, canonical_json, sha256_text, utc_now
from memory.domain.names import ad_hoc_filename, memory_filename, parse_filename, validate_filename
from memory.domain.scanner import scan

from .documents import document_find, document_missing
from .inputs import Caller, Input, Selector
from .memories import DeleteInput, WriteInput, memory_delete, memory_write
from .resolution import resolve
from .results import DecisionSummary, Result, WriteResult, decision_summary
from .scopes import resolve_ref
from .writes import candidate_submit

SUBAGENT_DENIED = "memory_subagent_write_denied"


class Operation(BaseModel):
    """One body operation of an atomic batch."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["add", "replace", "remove"] = Field(description=(
        "add: append content as a new block (needs content, forbids old_text); replace: replace old_text with "
        "content; remove: delete old_text (forbids content). old_text must occur exactly once in the body."))
    content: str | None = Field(default=None, description="The Markdown to add, or to put in place of old_text.")
    old_text: str | None = Field(default=None, description=(
        "The exact text to replace or remove; it must occur exactly once in the current body."))

    @model_validator(mode="after")
    def _shape(self) -> Operation:
        if self.action == "add" and (not self.content or self.old_text is not None):
            raise ValueError("add needs content and forbids old_text")
        if self.action == "replace" and (not self.old_text or self.content is None):
            raise ValueError("replace needs old_text and content")
        if self.action == "remove" and (not self.old_text or self.content is not None):
            raise ValueError("remove needs old_text and forbids content")
        return self


class ProposeInput(Selector):
    operation: Literal["add", "update", "delete", "batch"] | None = Field(default=None, description=(
        "What to do. add: a new memory (type, name, description, content). update: new content for a memory "
        "(filename, or the same name and type; name, type and description are kept unless given). delete: remove "
        "a memory (filename). batch: apply operations to the one document named by filename, atomically. Left "
        "out: batch when operations is given, otherwise required."))
    filename: str | None = Field(default=None, description=(
        "The document to change, as listed (such as project_release_process.md). Needed for delete and for a "
        "batch of operations."))
    type: MemoryType | None = Field(default=None, description=(
        "The memory type: user (the user's preferences and working style), feedback (corrections and review "
        "guidance), project (decisions and facts of this codebase) or reference (runbooks, links, external "
        "facts). Needed for add."))
    name: str | None = Field(default=None, description=(
        "A short title; the file name is derived from it. Needed for add and for a batch creating a document."))
    description: str | None = Field(default=None, description=(
        "One line saying what the memory holds, shown in the MEMORY.md index. Needed for add. With update or a "
        "batch of operations it replaces the description (and the index line): change it when the body's fact "
        "changed, or the index keeps saying the old one."))
    content: str | None = Field(default=None, description="The Markdown body, for add and update.")
    operations: list[Operation] | None = Field(default=None, min_length=1, max_length=100, description=(
        "An atomic batch of body operations on the one document named by filename, run in order; all land "
        "together as one decision or none does. Cannot be combined with operation or content."))
    dry_run: bool = Field(default=False, description="Decide without writing: the decision is returned and "
                          "nothing changes.")
    trace: bool = Field(default=False, description=(
        "Include the controller's rule trace (rule_trace, llm_trace) in the decision: why it decided what it did. "
        "Left out by default to keep the answer short."))

    @model_validator(mode="before")
    @classmethod
    def _batch_by_default(cls, data: Any) -> Any:
        # The spec's batch payload has operations and no operation.
        if isinstance(data, dict) and data.get("operation") is None and data.get("operations") is not None:
            return {**data, "operation": "batch"}
        return data

    @model_validator(mode="after")
    def _not_mixed(self) -> ProposeInput:
        if self.operations is not None and (self.operation != "batch" or self.content is not None):
            raise ValueError("operations cannot be mixed with operation add, update or delete, or with content")
        if self.operation == "batch" and self.operations is None:
            raise ValueError("operation batch needs operations")
        if self.operation is None:
            raise ValueError("give operation (add, update, delete) or operations")
        return self


class OperationStatus(Result):
    index: int
    action: str
    changed: bool
    status: Literal["applied", "not_applied", "already_applied"]


class ProposeResult(Result):
    decision: DecisionSummary
    applied: bool
    dry_run: bool
    operations: list[OperationStatus] | None = None

    def to_json(self) -> dict[str, Any]:
        # A single write has the write shape {decision, applied, dry_run}; only a batch reports its operations.
        document = super().to_json()
        if document["operations"] is None:
            del document["operations"]
        return document


class NoteInput(Selector):
    title: str = Field(min_length=1, max_length=200, description="A short title for the note.")
    content: str = Field(description="The note, in Markdown.")
    type: MemoryType = Field(default=MemoryType.PROJECT, description=(
        "The memory type the note is about: user, feedback, project (the default) or reference."))


def _deny_subagent(caller: Caller, data: Selector) -> None:
    if caller.parent_session_id:
        event_record(op=EventOp.WRITE_REJECTED, session_id=caller.session_id or "", actor=caller.origin.value,
                     scope=data.scope.value if data.scope else "",
                     metadata={"reason": SUBAGENT_DENIED, "parent_session_id": caller.parent_session_id})
        raise Rejected("A sub-agent session cannot write memory.", details={"reason": SUBAGENT_DENIED})


def memory_propose(*, data: ProposeInput, caller: Caller) -> ProposeResult:
    _deny_subagent(caller, data)
    selectors = data.model_dump(include={"scope", "agent_name", "agent_tier", "workspace"}, exclude_none=True)
    if data.operations is None:
        if data.operation == "delete":
            if not data.filename:
                raise ValidationError("A delete needs filename.", details={"field": "filename"})
            result = memory_delete(data=DeleteInput.parse({**selectors, "filename": data.filename,
                                                           "dry_run": data.dry_run}), caller=caller)
        else:
            fields = {"type": data.type, "name": data.name, "description": data.description,
                      "content": data.content or "", "dry_run": data.dry_run}
            if data.operation == "update":
                fields = _fill_from_existing(data, selectors, caller, fields)
            result = memory_write(data=WriteInput.parse({**selectors, **fields}), caller=caller)
        return _brief(ProposeResult(**result.to_json()), trace=data.trace)
    return _brief(_batch(data, selectors, caller), trace=data.trace)


def _brief(result: ProposeResult, *, trace: bool) -> ProposeResult:
    """An agent's answer without the 1-2 KB rule trace, unless it asked for it (`decisions show` has it too)."""
    if trace:
        return result
    return result.model_copy(update={"decision": result.decision.model_copy(update={"rule_trace": [],
                                                                                     "llm_trace": None})})


def _fill_from_existing(data: ProposeInput, selectors: dict[str, Any], caller: Caller,
                        fields: dict[str, Any]) -> dict[str, Any]:
    """An update changes what it gives and keeps the rest of the memory it names (by filename, or by the type and
    name its filename comes from); updating a memory that does not exist is memory.not_found, not an add."""
    if data.filename:
        filename = validate_filename(data.filename)
    elif data.type is not None and data.name:
        filename = memory_filename(data.type, data.name)
    else:
        raise ValidationError("An update names its memory: filename, or type and name.",
                              details={"field": "filename", "reason": "update_target"})
    memory_type, _slug = parse_filename(filename)
    if data.type is not None:
        # An update of user_x.md as type project would write another file, project_x.md: refused instead.
        check_filename_type(filename, data.type.value)
    resolved = resolve(Selector.parse(selectors), caller)
    ref = resolve_ref(Selector.parse(selectors), memory_type, resolved)
    stored = document_find(resolved.root(ref), filename)
    if stored is None:
        raise document_missing(filename, ref)
    current = stored.document.frontmatter
    return {**fields, "type": fields["type"] or current.type, "name": fields["name"] or current.name,
            "description": fields["description"] or current.description}


def _stage(body: str, operations: list[Operation]) -> tuple[str, list[bool]]:
    """Run the operations in order against the body. Any missing or ambiguous old_text rejects the batch."""
    changed: list[bool] = []
    for index, operation in enumerate(operations):
        if operation.action == "add":
            block = normalize_body(operation.content or "")
            blocks = [part.strip() for part in body.split("\n\n")] if body.strip() else []
            if block in blocks:
                changed.append(False)
                continue
            body = f"{body}\n\n{block}" if body.strip() else block
            changed.append(True)
            continue
        count = body.count(operation.old_text or "")
        if count != 1:
            raise ValidationError(
                f"Operation {index}: old_text {'was not found' if count == 0 else 'is ambiguous'} in the body.",
                details={"index": index, "reason": "old_text_missing" if count == 0 else "old_text_ambiguous"},
            )
        replacement = operation.content if operation.action == "replace" else ""
        body = body.replace(operation.old_text or "", replacement or "", 1)
        changed.append(True)
    return normalize_body(body), changed


def _batch(data: ProposeInput, selectors: dict[str, Any], caller: Caller) -> ProposeResult:
    if not data.filename:
        raise ValidationError("An atomic batch names its document: filename.", details={"field": "filename"})
    filename = validate_filename(data.filename)
    memory_type, slug = parse_filename(filename)
    if memory_type is None:
        raise ValidationError("Ad-hoc notes are not edited in place.", details={"filename": filename})
    selector = Selector.parse(selectors)
    resolved = resolve(selector, caller, create_workspace=True)
    ref = resolve_ref(selector, memory_type, resolved)
    root = resolved.root(ref)
    stored = document_find(root, filename)
    current = stored.document if stored is not None else None
    request_key = sha256_text(canonical_json({"filename": filename, "operations": [op.model_dump() for op in
                                                                                   data.operations or []],
                                               "name": data.name, "description": data.description}))
    probe = Candidate(ref=ref, origin=caller.origin, request_key=request_key)
    previous = previous_decision(probe, root)
    if previous is not None and not data.dry_run:
        # A retry: the body already holds these changes, so it is not staged again.
        return ProposeResult(decision=decision_summary(previous), applied=False, dry_run=False, operations=[
            OperationStatus(index=index, action=op.action, changed=False, status="already_applied")
            for index, op in enumerate(data.operations or [])])
    body, changed = _stage(current.body if current else "", data.operations or [])
    if not body.strip() and current is None:
        raise ValidationError("The batch leaves a new document empty.", details={"reason": "empty"})
    verdict = scan(data.name or "", data.description or "", body)
    if not verdict.clean:
        raise Rejected("The batch was rejected by the content scanner: " + ", ".join(verdict.rejected_rules) + ".",
                       details={"rules": list(verdict.rejected_rules)})
    if body.strip():
        check_body(body, resolved.limits)
    if current is None and not data.name:
        raise ValidationError("A new document needs name and description.", details={"field": "name"})
    if not body.strip():
        candidate = Candidate(ref=ref, origin=caller.origin, kind=RequestKind.DELETE, target_filename=filename,
                              named_target=True, session_id=caller.session_id, request_key=request_key)
    else:
        front = Frontmatter.build(
            name=data.name or (current.frontmatter.name if current else slug),
            description=data.description or (current.frontmatter.description if current else ""),
            type=memory_type, scope=ref.scope, agent=ref.agent_name or None, agent_tier=ref.agent_tier,
            provenance=(current.frontmatter.provenance.model_dump()
                        if current and current.frontmatter.provenance else None),
        )
        candidate = Candidate(ref=ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=front, body=body,
                              target_filename=filename, named_target=True, session_id=caller.session_id,
                              request_key=request_key)
    result = candidate_submit(candidate, root=root, config=resolved.config, dry_run=data.dry_run)
    statuses = [
        OperationStatus(index=index, action=operation.action, changed=changed[index],
                        status="applied" if result.applied and changed[index] else "not_applied")
        for index, operation in enumerate(data.operations or [])
    ]
    return ProposeResult(**result.to_json(), operations=statuses)


def memory_note(*, data: NoteInput, caller: Caller) -> WriteResult:
    """An ad-hoc note: `_system/ad_hoc/ad_hoc_<timestamp>_<slug>.md`, outside curated recall unless asked for."""
    _deny_subagent(caller, data)
    selector = Selector.parse(data.model_dump(include={"scope", "agent_name", "agent_tier", "workspace"},
                                              exclude_none=True))
    resolved = resolve(selector, caller, create_workspace=True)
    ref = resolve_ref(selector, data.type, resolved)
    body = normalize_body(data.content)
    check_body(body, resolved.limits)
    filename = "_system/ad_hoc/" + ad_hoc_filename(utc_now(), data.title)
    front = Frontmatter.build(name=data.title, description=f"Ad-hoc note: {data.title}", type=data.type,
                              scope=ref.scope, agent=ref.agent_name or None, agent_tier=ref.agent_tier)
    candidate = Candidate(ref=ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=front, body=body,
                          target_filename=filename, session_id=caller.session_id)
    return candidate_submit(candidate, root=resolved.root(ref), config=resolved.config)


__all__ = ["memory_propose", "memory_note", "ProposeInput", "NoteInput", "Input", "Origin", "Scope"]
