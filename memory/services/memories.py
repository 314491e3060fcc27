"""The memory noun: list, show, write, edit, delete. Every write goes through the controller."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memory.catalog.indexer import DiskFile, entry_fields
from memory.domain.document import check_body, normalize_body, split_frontmatter
from memory.domain.enums import MUTATING_OPS, MemoryType, Op, RequestKind, Scope
from memory.domain.errors import ValidationError
from memory.domain.models import Candidate, Frontmatter, sha256_text, utc_now
from memory.domain.names import memory_filename, parse_filename, validate_filename
from memory.models import CatalogEntry, Decision
from memory.recall.package import staleness_banner
from memory.store import files

from .agents import agent_refs
from .documents import document_get, document_missing
from .inputs import Caller, ReadSelector, Selector, WriteSelector, all_workspaces_field
from .paging import cursor_field, limit_field, page_of
from .resolution import narrowed_to_global, resolve, resolve_span
from .results import (
    MemoryDetail,
    MemoryList,
    MemoryShow,
    Page,
    WriteResult,
    memory_brief,
    memory_summary,
    memory_summary_from_fields,
)
from .scopes import file_ref, resolve_ref, visible_refs, visible_refs_across, write_needs_workspace
from .writes import candidate_submit

FILENAME = "The memory's file name as listed, such as project_release_process.md."
DRY_RUN = "Decide without writing: the decision is returned and nothing changes."
TYPE = ("The memory type: user (preferences, working style), feedback (corrections and review guidance), project "
        "(decisions and facts of this codebase) or reference (runbooks, links, external facts).")


class ListInput(ReadSelector):
    scope: Scope | None = Field(default=None, description=(
        "Only this scope: global, workspace or agent. Omitted: every scope visible here, that is global, this "
        "workspace and every agent's tiers (only that agent's with agent_name; an agent's own call sees only its "
        "own). compozy memory agents lists the agents."))
    type: MemoryType | None = Field(default=None, description=(
        "Only memories of this type: user, feedback, project or reference."))
    sort: Literal["recent", "name"] = Field(default="recent", description=(
        "Order: recent (last updated first, the default) or name (alphabetical)."))
    cursor: str | None = cursor_field()
    limit: int | None = limit_field()
    detail: bool = Field(default=False, description=(
        "Give each item in full (workspace_id, created_at, size, content_hash, is_system) rather than only "
        "filename, name, description, type, scope, agent_name, agent_tier and updated_at."))
    all_workspaces: bool = all_workspaces_field()


class ShowInput(Selector):
    filename: str = Field(description=FILENAME)


class WriteInput(WriteSelector):
    type: MemoryType | None = Field(default=None, description=TYPE + " Required unless the content's own "
                                    "frontmatter gives it.")
    name: str | None = Field(default=None, description=(
        "A short title; the file name is derived from it (<type>_<slug>.md)."))
    description: str | None = Field(default=None, description=(
        "One line saying what the memory holds; it is what the MEMORY.md index shows."))
    content: str = Field(description="The Markdown body (it may start with a frontmatter block).")
    dry_run: bool = Field(default=False, description=DRY_RUN)
    create_workspace: bool = Field(default=False, description=(
        "Create the workspace at the directory named by workspace (or the current directory) even when it is "
        "not a git checkout: the operator's explicit choice. System directories and directories the caller does "
        "not own are refused even then."))


class EditInput(Selector):
    filename: str = Field(description=FILENAME)
    name: str | None = Field(default=None, description="A new title (the file name stays).")
    description: str | None = Field(default=None, description="A new one-line description.")
    content: str | None = Field(default=None, description="A new Markdown body, replacing the old one.")
    dry_run: bool = Field(default=False, description=DRY_RUN)


class DeleteInput(Selector):
    filename: str = Field(description=FILENAME)
    dry_run: bool = Field(default=False, description=DRY_RUN)


def memory_list(*, data: ListInput, caller: Caller) -> MemoryList:
    span = resolve_span(data.workspace, caller, all_workspaces=data.all_workspaces)
    every_agent = not data.agent_name and data.scope in (None, Scope.AGENT)
    if every_agent and data.scope is Scope.AGENT:
        refs = []  # scope agent with no agent named: an operator's list of every agent's tiers (below)
    else:
        selector = data.model_copy(update={"agent_tier": None}) if every_agent else data
        refs = visible_refs_across(selector, span.workspace_ids) if span.across else visible_refs(selector,
                                                                                                  span.resolved)
    if every_agent:
        # No agent named: an operator sees every agent's tiers too (an agent's own call sees only its own).
        refs += agent_refs(span.workspace_ids, caller=caller, tier=data.agent_tier)
    queryset = CatalogEntry.objects.filter(root_key__in=[ref.root_key for ref in refs])
    if not data.include_system:
        queryset = queryset.filter(is_system=False)
    if data.type is not None:
        queryset = queryset.filter(type=data.type.value)
    ordering = ("-updated_at", "filename", "root_key") if data.sort == "recent" else ("name", "filename", "root_key")
    binding = {"roots": sorted(ref.root_key for ref in refs), "type": data.type, "sort": data.sort,
               "system": data.include_system}  # detail changes only the items' width, not the page
    entries, page = page_of(queryset.order_by(*ordering), cursor=data.cursor, limit=data.limit, binding=binding)
    summaries = [memory_summary(entry) for entry in entries]
    items = summaries if data.detail else [memory_brief(summary) for summary in summaries]
    warning = None if span.across else narrowed_to_global(data.scope, span.resolved, caller, done="listed")
    return MemoryList(memories=items, page=Page(**page), warning=warning)


def memory_show(*, data: ShowInput, caller: Caller) -> MemoryShow:
    filename = validate_filename(data.filename, include_system=data.include_system)
    resolved = resolve(data, caller)
    ref = file_ref(data, filename, resolved)
    root = resolved.root(ref)
    stored = document_get(root, filename, ref)
    disk = DiskFile(filename, stored.text, sha256_text(stored.text), stored.size, stored.mtime_ns)
    fields = entry_fields(ref, disk, stored.document)
    banner = staleness_banner(fields["updated_at"], utc_now(),
                              resolved.config.memory.recall.freshness.banner_after_days)
    return MemoryShow(memory=MemoryDetail(summary=memory_summary_from_fields(fields), content=stored.document.body,
                                          path=str(root / filename), banner=banner))


def memory_write(*, data: WriteInput, caller: Caller) -> WriteResult:
    # Content may carry its own frontmatter block; its keys are held to the same strict schema.
    embedded, body_text = split_frontmatter(data.content)
    embedded = embedded or {}
    unknown = set(embedded) - set(Frontmatter.model_fields)
    if unknown:
        key = sorted(unknown)[0]
        raise ValidationError(f"Unknown frontmatter key: {key!r}.", details={"field": key, "reason": "unknown_key"})
    memory_type = data.type or embedded.get("type")
    if memory_type is None:
        raise ValidationError("type is required: user, feedback, project or reference.", details={"field": "type"})
    try:
        memory_type = MemoryType(memory_type)
    except ValueError:
        raise ValidationError(
            f"Unknown memory type {memory_type!r}: use user, feedback, project or reference.",
            details={"field": "type", "reason": "unknown_type"},
        ) from None
    if data.scope is None and embedded.get("scope") is not None:
        # The embedded block's scope goes through the same input model, so it fails with the same code.
        data = WriteInput.parse({**data.model_dump(exclude_none=True), "scope": embedded["scope"]})
    resolved = resolve(data, caller, create_workspace=write_needs_workspace(data, memory_type))
    ref = resolve_ref(data, memory_type, resolved)
    body = normalize_body(body_text)
    check_body(body, resolved.limits)
    front = Frontmatter.build(
        name=data.name or embedded.get("name"),
        description=data.description or embedded.get("description"),
        type=memory_type,
        scope=ref.scope,
        agent=ref.agent_name or None,
        agent_tier=ref.agent_tier,
        provenance=embedded.get("provenance"),
    )
    candidate = Candidate(
        ref=ref,
        origin=caller.origin,
        kind=RequestKind.WRITE,
        frontmatter=front,
        body=body,
        target_filename=memory_filename(memory_type, front.name),
        session_id=caller.session_id,
    )
    return candidate_submit(candidate, root=resolved.root(ref), config=resolved.config, dry_run=data.dry_run)


def memory_edit(*, data: EditInput, caller: Caller) -> WriteResult:
    filename = validate_filename(data.filename)
    memory_type, _slug = parse_filename(filename)
    if memory_type is None:
        raise ValidationError("Ad-hoc notes are not edited in place.", details={"filename": filename})
    resolved = resolve(data, caller)
    ref = resolve_ref(data, memory_type, resolved)
    root = resolved.root(ref)
    current = document_get(root, filename, ref).document
    if data.name is None and data.description is None and data.content is None:
        raise ValidationError("Nothing to change: give content, name or description.",
                              details={"field": "content", "reason": "empty_edit"})
    body = normalize_body(data.content) if data.content is not None else current.body
    check_body(body, resolved.limits)
    front = Frontmatter.build(
        name=data.name or current.frontmatter.name,
        description=data.description or current.frontmatter.description,
        type=memory_type,
        scope=ref.scope,
        agent=ref.agent_name or None,
        agent_tier=ref.agent_tier,
        provenance=current.frontmatter.provenance.model_dump() if current.frontmatter.provenance else None,
    )
    candidate = Candidate(
        ref=ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=front, body=body,
        target_filename=filename, named_target=True, session_id=caller.session_id,
    )
    return candidate_submit(candidate, root=root, config=resolved.config, dry_run=data.dry_run)


def memory_delete(*, data: DeleteInput, caller: Caller) -> WriteResult:
    filename = validate_filename(data.filename)
    resolved = resolve(data, caller)
    ref = file_ref(data, filename, resolved)
    root = resolved.root(ref)
    if (not CatalogEntry.objects.filter(root_key=ref.root_key, filename=filename).exists()
            and files.read_bytes(root, filename) is None and not _deleted_last(ref.root_key, filename)):
        # Deleting nothing is an error, as showing nothing is: a typo must not pass for a delete. A file on disk
        # that the catalog has not seen (a hand edit, a broken file) goes on to the controller, which decides; so
        # does a file whose last change was a delete, so that a retried delete (after a crash, or twice) gets its
        # decision back instead of an error.
        raise document_missing(filename, ref)
    candidate = Candidate(
        ref=ref, origin=caller.origin, kind=RequestKind.DELETE, target_filename=filename, named_target=True,
        session_id=caller.session_id,
    )
    return candidate_submit(candidate, root=root, config=resolved.config, dry_run=data.dry_run)


def _deleted_last(root_key: str, filename: str) -> bool:
    changes = Decision.objects.filter(root_key=root_key, target_filename=filename,
                                      op__in=[op.value for op in MUTATING_OPS])
    last = changes.order_by("-seq").values_list("op", flat=True).first()
    return last == Op.DELETE.value
