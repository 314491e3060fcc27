"""promote: copy a memory into another scope through the controller (a new candidate in the target scope)."""

from __future__ import annotations

from pydantic import Field

from memory.domain.enums import AgentTier, RequestKind, Scope
from memory.domain.errors import ScopeInvalid, ValidationError
from memory.domain.models import Candidate, Frontmatter
from memory.domain.names import parse_filename, validate_filename

from .documents import document_get
from .inputs import Caller, Selector
from .resolution import resolve
from .results import WriteResult
from .scopes import resolve_ref
from .writes import candidate_submit


class PromoteInput(Selector):
    """The memory is found with the usual selectors (scope, agent_name, agent_tier, workspace), exactly as `show`
    finds it; the to_* fields say where the copy goes, with the same choices."""

    filename: str = Field(description="The memory's file name as listed, such as project_release_process.md.")
    to_scope: Scope = Field(description="The scope to copy the memory into: global, workspace or agent.")
    to_agent_name: str | None = Field(default=None, description=(
        "The agent to copy it to, with to_scope agent. Default: agent_name."))
    to_agent_tier: AgentTier | None = Field(default=None, description=(
        "The agent tier to copy it to, with to_scope agent: workspace (the default) or global."))
    dry_run: bool = Field(default=False, description="Decide without writing: the decision is returned and "
                          "nothing changes.")


def memory_promote(*, data: PromoteInput, caller: Caller) -> WriteResult:
    filename = validate_filename(data.filename)
    memory_type, _slug = parse_filename(filename)
    if memory_type is None:
        raise ValidationError("Ad-hoc notes cannot be promoted.", details={"field": "filename", "filename": filename})
    source_selector = Selector.parse(data.model_dump(include={"scope", "agent_name", "agent_tier", "workspace"},
                                                    exclude_none=True))
    target_fields: dict[str, object] = {"workspace": data.workspace, "scope": data.to_scope}
    if data.to_scope is Scope.AGENT:
        if not (data.to_agent_name or data.agent_name):
            raise ScopeInvalid("to_scope agent needs to_agent_name (or agent_name).",
                               details={"field": "to_agent_name", "reason": "agent_required"})
        target_fields |= {"agent_name": data.to_agent_name or data.agent_name,
                          "agent_tier": data.to_agent_tier or AgentTier.WORKSPACE}
    elif data.to_agent_name or data.to_agent_tier:
        raise ScopeInvalid("to_agent_name and to_agent_tier are only allowed with to_scope agent.",
                           details={"field": "to_scope", "reason": "agent_outside_agent_scope"})
    target_selector = Selector.parse(target_fields)
    source_resolved = resolve(source_selector, caller)
    source_ref = resolve_ref(source_selector, memory_type, source_resolved)
    document = document_get(source_resolved.root(source_ref), filename, source_ref).document
    target_resolved = resolve(target_selector, caller, create_workspace=True)
    target_ref = resolve_ref(target_selector, memory_type, target_resolved)
    if target_ref.root_key == source_ref.root_key:
        raise ValidationError("The memory is already in that scope: to_scope names the scope it is in.",
                              details={"field": "to_scope", "reason": "same_scope"})
    front = Frontmatter.build(name=document.frontmatter.name, description=document.frontmatter.description,
                              type=memory_type, scope=target_ref.scope, agent=target_ref.agent_name or None,
                              agent_tier=target_ref.agent_tier)
    candidate = Candidate(ref=target_ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=front,
                          body=document.body, target_filename=filename, named_target=True,
                          session_id=caller.session_id)
    return candidate_submit(candidate, root=target_resolved.root(target_ref), config=target_resolved.config,
                            dry_run=data.dry_run)
