"""Scope rules: which root a call writes or reads (explicit selectors, else the memory type's conservative
default, never the agent scope), and the roots a read may see."""

from __future__ import annotations

from memory.domain.enums import AgentTier, MemoryType, Scope
from memory.domain.errors import ScopeInvalid, WorkspaceRequired
from memory.domain.models import ScopeRef, needs_workspace
from memory.domain.names import parse_filename, validate_agent_name

from .inputs import Selector
from .resolution import Resolved

DEFAULT_SCOPE_BY_TYPE = {
    MemoryType.USER: Scope.GLOBAL,
    MemoryType.FEEDBACK: Scope.GLOBAL,
    MemoryType.PROJECT: Scope.WORKSPACE,
    MemoryType.REFERENCE: Scope.WORKSPACE,
}


def agent_write_selector(memory_type: str | None, agent_name: str | None) -> dict[str, str]:
    """Where an agent's write goes when it names no scope. Never global, which is the operators' own: project and
    reference memories go to the workspace, user and feedback memories to the agent's workspace tier (to the
    workspace when the agent has no name)."""
    personal = memory_type in (MemoryType.USER.value, MemoryType.FEEDBACK.value)
    if personal and agent_name:
        return {"scope": Scope.AGENT.value, "agent_name": agent_name, "agent_tier": AgentTier.WORKSPACE.value}
    return {"scope": Scope.WORKSPACE.value}


def write_needs_workspace(selector: Selector, memory_type: MemoryType | None) -> bool:
    """Whether a write of this type with these selectors lands in a workspace (so one may be created for it)."""
    scope = selector.scope or (DEFAULT_SCOPE_BY_TYPE[memory_type] if memory_type else None)
    return scope is not None and needs_workspace(scope, selector.agent_tier)


def resolve_ref(selector: Selector, memory_type: MemoryType | None, resolved: Resolved) -> ScopeRef:
    """One root, from explicit selectors or the type's conservative default (never the agent scope)."""
    scope = selector.scope
    if scope is None:
        if selector.agent_name or selector.agent_tier:
            raise ScopeInvalid("agent_name and agent_tier need scope agent.",
                              details={"field": "scope", "reason": "agent_without_scope"})
        if memory_type is None:
            raise ScopeInvalid("scope is required here: it cannot be inferred.",
                              details={"field": "scope", "reason": "scope_required"})
        scope = DEFAULT_SCOPE_BY_TYPE[memory_type]
    ref = _explicit_ref(scope, selector, resolved.workspace_id)
    if ref is None:
        raise WorkspaceRequired(
            f"Scope {scope.value} needs a workspace, and none was given or found: set workspace.",
            details={"field": "workspace", "scope": scope.value, "reason": "no_workspace"},
        )
    return ref


def file_ref(selector: Selector, filename: str, resolved: Resolved) -> ScopeRef:
    """The root of a named file: the selectors, else the default scope of the type its name carries."""
    memory_type, _slug = parse_filename(filename)
    return resolve_ref(selector, memory_type, resolved)


def visible_refs(selector: Selector, resolved: Resolved) -> list[ScopeRef]:
    """The roots a read may see: global, this workspace, this agent's global tier and its tier here."""
    if selector.scope is not None:
        return [resolve_ref(selector, None, resolved)]
    return _visible_in(selector, resolved.workspace_id)


def visible_refs_across(selector: Selector, workspace_ids: list[str]) -> list[ScopeRef]:
    """The roots a read across these workspaces may see: what `visible_refs` gives in each one, the roots they
    share (global, an agent's global tier) once. With a scope that needs a workspace and none known: nothing."""
    refs: dict[str, ScopeRef] = {}
    for workspace_id in workspace_ids or [""]:
        if selector.scope is not None:
            ref = _explicit_ref(selector.scope, selector, workspace_id)
            found = [ref] if ref is not None else []
        else:
            found = _visible_in(selector, workspace_id)
        for ref in found:
            refs.setdefault(ref.root_key, ref)
    return list(refs.values())


def _explicit_ref(scope: Scope, selector: Selector, workspace_id: str) -> ScopeRef | None:
    """The root of `scope` with the selector's agent in workspace `workspace_id` ("" for none); None when that
    root needs a workspace and there is none."""
    if scope is Scope.AGENT:
        if not selector.agent_name:
            raise ScopeInvalid("Scope agent needs agent_name.",
                               details={"field": "agent_name", "reason": "agent_required"})
        tier = selector.agent_tier or AgentTier.WORKSPACE
        agent = validate_agent_name(selector.agent_name)
    elif selector.agent_name or selector.agent_tier:
        raise ScopeInvalid("agent_name and agent_tier are only allowed with scope agent.",
                           details={"field": "scope", "reason": "agent_outside_agent_scope"})
    else:
        tier, agent = None, ""
    if not needs_workspace(scope, tier):
        return ScopeRef(scope=scope, agent_name=agent, agent_tier=tier)
    if not workspace_id:
        return None
    return ScopeRef(scope=scope, workspace_id=workspace_id, agent_name=agent, agent_tier=tier)


def _visible_in(selector: Selector, ws: str) -> list[ScopeRef]:
    """Every scope's roots visible from workspace `ws` ("" for none), with the agent's two tiers when named."""
    if selector.agent_tier and not selector.agent_name:
        raise ScopeInvalid("agent_tier needs agent_name.",
                           details={"field": "agent_name", "reason": "tier_without_agent"})
    refs = [ScopeRef(scope=Scope.GLOBAL)]
    if ws:
        refs.append(ScopeRef(scope=Scope.WORKSPACE, workspace_id=ws))
    if selector.agent_name:
        agent = validate_agent_name(selector.agent_name)
        tiers = [selector.agent_tier] if selector.agent_tier else [AgentTier.GLOBAL, AgentTier.WORKSPACE]
        for tier in tiers:
            if tier is AgentTier.WORKSPACE and not ws:
                continue
            refs.append(ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=tier,
                                 workspace_id=ws if tier is AgentTier.WORKSPACE else ""))
    return refs
