"""Who is calling, from where, and which memory roots that makes visible.

Every read and write is keyed by an explicit workspace ULID (and agent scope by an explicit agent); this module
is where a surface's selectors become those keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from compozy.config import Config, compozy_home, get_config
from memory.controller.events import event_record
from memory.domain.enums import AgentTier, EventOp, MemoryType, Origin, Scope
from memory.domain.errors import ScopeInvalid, ValidationError, WorkspaceRequired
from memory.domain.models import ScopeRef, translate_pydantic_error, utc_now
from memory.domain.names import validate_agent_name
from memory.models import CatalogEntry, Workspace
from memory.store import roots as store_roots
from memory.store.workspace import (
    WorkspaceIdentity,
    create_identity,
    default_workspace_dir,
    find_workspace_dir,
    is_ulid,
    read_identity,
)

DEFAULT_SCOPE_BY_TYPE = {
    MemoryType.USER: Scope.GLOBAL,
    MemoryType.FEEDBACK: Scope.GLOBAL,
    MemoryType.PROJECT: Scope.WORKSPACE,
    MemoryType.REFERENCE: Scope.WORKSPACE,
}


class Input(BaseModel):
    """Base of every service input: unknown fields are errors, on every surface alike."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Any:
        try:
            return cls.model_validate({k: v for k, v in data.items() if v is not None})
        except PydanticValidationError as exc:
            raise translate_pydantic_error(exc, where="request") from None


class Selector(Input):
    scope: Scope | None = None
    agent_name: str | None = None
    agent_tier: AgentTier | None = None
    workspace: str | None = None
    include_system: bool = False


@dataclass(frozen=True)
class Caller:
    origin: Origin
    cwd: Path | None = None
    session_id: str | None = None
    parent_session_id: str | None = None


@dataclass(frozen=True)
class Resolved:
    workspace: WorkspaceIdentity | None
    config: Config

    @property
    def workspace_id(self) -> str:
        return self.workspace.id if self.workspace else ""

    @property
    def event_workspace_ids(self) -> list[str]:
        """Events visible here: the global ones (no workspace) and this workspace's; never another's."""
        return ["", self.workspace_id] if self.workspace_id else [""]

    @property
    def workspace_dir(self) -> Path | None:
        return self.workspace.directory if self.workspace else None

    def root(self, ref: ScopeRef) -> Path:
        return store_roots.root_path(ref, self.workspace_dir)


def resolve(selector: Selector, caller: Caller, *, create_workspace: bool = False) -> Resolved:
    workspace = resolve_workspace(selector.workspace, caller, create=create_workspace)
    config = get_config(workspace.directory if workspace else None)
    return Resolved(workspace, config)


def _auto_create() -> bool:
    return get_config(None).memory.workspace.auto_create


def resolve_workspace(spec: str | None, caller: Caller, *, create: bool) -> WorkspaceIdentity | None:
    identity: WorkspaceIdentity | None = None
    if spec:
        if is_ulid(spec):
            path = Workspace.objects.filter(id=spec).values_list("path", flat=True).first()
            if path is None or not (Path(path) / ".compozy" / "workspace.toml").is_file():
                raise WorkspaceRequired(
                    f"Workspace {spec} is not known on this machine. Pass its path instead.",
                    details={"workspace": spec, "reason": "unknown_workspace"},
                )
            identity = read_identity(Path(path))
            if identity.id != spec:
                raise WorkspaceRequired(
                    f"The directory last seen for workspace {spec} now holds workspace {identity.id}.",
                    details={"workspace": spec, "reason": "workspace_mismatch"},
                )
        else:
            path = Path(spec).expanduser()
            if not path.is_absolute() and caller.cwd is not None:
                path = caller.cwd / path
            if not path.is_dir():
                raise WorkspaceRequired(
                    f"--workspace {spec} is neither a known workspace id nor a directory.",
                    details={"workspace": spec, "reason": "not_a_directory"},
                )
            found = find_workspace_dir(path)
            if found is not None:
                identity = read_identity(found)
            elif create and _auto_create():
                identity = create_identity(path)
    elif caller.cwd is not None:
        found = find_workspace_dir(caller.cwd)
        if found is not None:
            identity = read_identity(found)
        elif create and _auto_create():
            identity = create_identity(default_workspace_dir(caller.cwd))
    if identity is not None:
        register_workspace(identity)
    return identity


_registered: set[tuple[str, str, str]] = set()


def register_workspace(identity: WorkspaceIdentity) -> None:
    """Remember where a workspace lives now. A move keeps its memory (the ULID is the key) and is recorded."""
    here = str(identity.directory.resolve())
    seen = (str(compozy_home()), identity.id, here)
    if seen in _registered:
        return  # this process already recorded the workspace at this path
    known = Workspace.objects.filter(id=identity.id).values_list("path", flat=True).first()
    if known == here:
        _registered.add(seen)
        return
    now = utc_now()
    Workspace.objects.update_or_create(
        id=identity.id,
        defaults={"path": here, "realpath_at_creation": identity.realpath_at_creation, "last_seen_at": now},
        create_defaults={"path": here, "realpath_at_creation": identity.realpath_at_creation,
                         "created_at": now, "last_seen_at": now},
    )
    previous = known if known is not None else identity.realpath_at_creation
    if previous != here:
        event_record(
            op=EventOp.WORKSPACE_RELOCATED,
            scope=Scope.WORKSPACE.value,
            workspace_id=identity.id,
            actor="resolver",
            metadata={"from": previous, "to": here, "realpath_at_creation": identity.realpath_at_creation},
        )


def needs_workspace(scope: Scope, tier: AgentTier | None) -> bool:
    return scope is Scope.WORKSPACE or (scope is Scope.AGENT and tier is not AgentTier.GLOBAL)


def resolve_ref(selector: Selector, memory_type: MemoryType | None, resolved: Resolved) -> ScopeRef:
    """One root, from explicit selectors or the type's conservative default (never the agent scope)."""
    scope = selector.scope
    if scope is None:
        if selector.agent_name or selector.agent_tier:
            raise ScopeInvalid("--agent and --agent-tier need --scope agent.", details={"reason": "agent_without_scope"})
        if memory_type is None:
            raise ScopeInvalid("Pass --scope: it cannot be inferred here.", details={"reason": "scope_required"})
        scope = DEFAULT_SCOPE_BY_TYPE[memory_type]
    tier: AgentTier | None = None
    agent = ""
    if scope is Scope.AGENT:
        if not selector.agent_name:
            raise ScopeInvalid("Agent scope needs --agent <name>.", details={"field": "agent_name", "reason": "agent_required"})
        agent = validate_agent_name(selector.agent_name)
        tier = selector.agent_tier or AgentTier.WORKSPACE
    elif selector.agent_name or selector.agent_tier:
        raise ScopeInvalid(
            "--agent and --agent-tier are only allowed with --scope agent.",
            details={"reason": "agent_outside_agent_scope"},
        )
    workspace_id = ""
    if needs_workspace(scope, tier):
        if resolved.workspace is None:
            raise WorkspaceRequired(
                "This scope needs a workspace: run inside one, set COMPOZY_WORKSPACE, or pass --workspace.",
                details={"scope": scope.value, "reason": "no_workspace"},
            )
        workspace_id = resolved.workspace.id
    return ScopeRef(scope=scope, workspace_id=workspace_id, agent_name=agent, agent_tier=tier)


def visible_refs(selector: Selector, resolved: Resolved) -> list[ScopeRef]:
    """The roots a read may see: global, this workspace, this agent's global tier and its tier here."""
    if selector.scope is not None:
        return [resolve_ref(selector, None, resolved)]
    if selector.agent_tier and not selector.agent_name:
        raise ScopeInvalid("--agent-tier needs --agent.", details={"reason": "tier_without_agent"})
    refs = [ScopeRef(scope=Scope.GLOBAL)]
    ws = resolved.workspace_id
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


def administered_refs(resolved: Resolved) -> list[ScopeRef]:
    """Roots an operator command (health, reindex, decisions) covers: global, every agent's global tier, and
    this workspace with its agents. Other workspaces stay out."""
    refs = {ScopeRef(scope=Scope.GLOBAL).root_key: ScopeRef(scope=Scope.GLOBAL)}
    agents_dir = store_roots.agents_home()
    agent_names = {p.name for p in agents_dir.iterdir() if (p / "memory").is_dir()} if agents_dir.is_dir() else set()
    # A key range instead of startswith: SQLite serves a range from the index, a LIKE scans every row.
    agent_rows = CatalogEntry.objects.filter(root_key__gte="agent:", root_key__lt="agent;")
    keys = agent_rows.filter(root_key__endswith=":global")
    agent_names |= {key.split(":")[1] for key in keys.values_list("root_key", flat=True).distinct()}
    for agent in sorted(agent_names):
        try:
            validate_agent_name(agent)
        except ScopeInvalid:
            continue
        ref = ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.GLOBAL)
        refs[ref.root_key] = ref
    if resolved.workspace is not None:
        ws = resolved.workspace
        ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=ws.id)
        refs[ref.root_key] = ref
        ws_agents_dir = ws.directory / ".compozy" / "agents"
        names = {p.name for p in ws_agents_dir.iterdir() if (p / "memory").is_dir()} if ws_agents_dir.is_dir() else set()
        suffix = f":workspace:{ws.id}"
        rows = agent_rows.filter(root_key__endswith=suffix)
        names |= {key.split(":")[1] for key in rows.values_list("root_key", flat=True).distinct()}
        for agent in sorted(names):
            try:
                validate_agent_name(agent)
            except ScopeInvalid:
                continue
            ref = ScopeRef(scope=Scope.AGENT, agent_name=agent, agent_tier=AgentTier.WORKSPACE, workspace_id=ws.id)
            refs[ref.root_key] = ref
    return list(refs.values())


def require_valid(value: Any, message: str, **details: Any) -> None:
    if not value:
        raise ValidationError(message, details=details)
