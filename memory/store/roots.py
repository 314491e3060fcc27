"""Where each scope's memory lives on disk."""

from __future__ import annotations

from pathlib import Path

from compozy.config import compozy_home
from memory.domain.enums import AgentTier, Scope
from memory.domain.models import ScopeRef

_global: tuple[Path, Path] | None = None  # (the home, its memory directory), rebuilt when the home changes


def global_root() -> Path:
    global _global
    home = compozy_home()
    cached = _global
    if cached is None or cached[0] is not home:
        cached = _global = (home, home / "memory")
    return cached[1]


def agents_home() -> Path:
    return compozy_home() / "agents"


def root_path(ref: ScopeRef, workspace_dir: Path | None) -> Path:
    """The directory of a memory root. Workspace-keyed roots need the workspace's current directory."""
    if ref.scope is Scope.GLOBAL:
        return global_root()
    if ref.scope is Scope.AGENT and ref.agent_tier is AgentTier.GLOBAL:
        return agents_home() / ref.agent_name / "memory"
    if workspace_dir is None:
        raise ValueError(f"root {ref.root_key} needs its workspace directory")
    if ref.scope is Scope.WORKSPACE:
        return workspace_dir / ".compozy" / "memory"
    return workspace_dir / ".compozy" / "agents" / ref.agent_name / "memory"
