"""promote: copy a memory into another scope through the controller (a new candidate in the target scope)."""

from __future__ import annotations

import re

from pydantic import field_validator

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

_SCOPE_SPEC = re.compile(r"^(global|workspace|agent)(?::(workspace|global))?$")


def parse_scope_spec(spec: str) -> tuple[Scope, AgentTier | None]:
    """`global`, `workspace`, `agent` (workspace tier) or `agent:<tier>`."""
    match = _SCOPE_SPEC.match(spec or "")
    if not match:
        raise ScopeInvalid(f"{spec!r} is not a scope: use global, workspace, agent or agent:<workspace|global>.",
                           details={"field": "scope", "value": spec})
    scope = Scope(match.group(1))
    if match.group(2) and scope is not Scope.AGENT:
        raise ScopeInvalid("Only the agent scope has tiers.", details={"field": "scope", "value": spec})
    tier = AgentTier(match.group(2)) if match.group(2) else (AgentTier.WORKSPACE if scope is Scope.AGENT else None)
    return scope, tier


class PromoteInput(Selector):
    filename: str
    from_scope: str
    to_scope: str
    dry_run: bool = False

    @field_validator("from_scope", "to_scope")
    @classmethod
    def _spec(cls, value: str) -> str:
        parse_scope_spec(value)
        return value


def memory_promote(*, data: PromoteInput, caller: Caller) -> WriteResult:
    filename = validate_filename(data.filename)
    memory_type, _slug = parse_filename(filename)
    if memory_type is None:
        raise ValidationError("Ad-hoc notes cannot be promoted.", details={"filename": filename})
    source_scope, source_tier = parse_scope_spec(data.from_scope)
    target_scope, target_tier = parse_scope_spec(data.to_scope)
    if (source_scope, source_tier) == (target_scope, target_tier):
        raise ValidationError("--from and --to name the same scope.", details={"reason": "same_scope"})
    base = {"workspace": data.workspace}
    agent = {"agent_name": data.agent_name} if data.agent_name else {}
    source_selector = Selector.parse({**base, "scope": source_scope, **(agent if source_scope is Scope.AGENT else {}),
                                      "agent_tier": source_tier})
    target_selector = Selector.parse({**base, "scope": target_scope, **(agent if target_scope is Scope.AGENT else {}),
                                      "agent_tier": target_tier})
    source_resolved = resolve(source_selector, caller)
    source_ref = resolve_ref(source_selector, memory_type, source_resolved)
    document = document_get(source_resolved.root(source_ref), filename, source_ref).document
    target_resolved = resolve(target_selector, caller, create_workspace=True)
    target_ref = resolve_ref(target_selector, memory_type, target_resolved)
    front = Frontmatter.build(name=document.frontmatter.name, description=document.frontmatter.description,
                              type=memory_type, scope=target_ref.scope, agent=target_ref.agent_name or None,
                              agent_tier=target_ref.agent_tier)
    candidate = Candidate(ref=target_ref, origin=caller.origin, kind=RequestKind.WRITE, frontmatter=front,
                          body=document.body, target_filename=filename, named_target=True,
                          session_id=caller.session_id)
    return candidate_submit(candidate, root=target_resolved.root(target_ref), config=target_resolved.config,
                            dry_run=data.dry_run)
