"""The sync noun: `memory sync` keeps global memory (`$COMPOZY_HOME/memory`) in a git repository that follows one
person across machines (memory/controller/sync.py does it). It runs from every surface with parity (CLI, REST,
the admin MCP tool), after each session stop when `memory.sync.after_session_stop` is on, and on the task
cluster's schedule every `memory.sync.every_minutes`."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from compozy.config import get_config
from memory.controller import sync as engine
from memory.domain.enums import AgentTier, Scope
from memory.domain.errors import ValidationError
from memory.domain.models import ScopeRef
from memory.store import git
from memory.store import roots as store_roots

from .inputs import Caller, Input
from .results import Result
from .root_discovery import administered_refs_across


class SyncInput(Input):
    remote: str | None = Field(default=None, description=(
        "The git remote to sync with: a bare repository's path or any URL git can reach (credentials stay with "
        "git's own helper or SSH agent; never put a password in it). Needed the first time; afterwards the "
        "repository remembers it, and a different one replaces it."))

    @field_validator("remote")
    @classmethod
    def _no_option(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or value.startswith("-")):
            # A remote starting with "-" would be read by git as an option.
            raise ValidationError("remote must be a path or URL, not empty nor starting with '-'.",
                                  details={"field": "remote", "reason": "invalid"})
        if value is not None and git.redact(value) != value and ":" in value.split("://", 1)[-1].split("@", 1)[0]:
            # git would keep the password in .git/config: Compozy never stores a credential.
            raise ValidationError("remote must not carry a password (user:password@): let git's credential "
                                  "helper or SSH agent hold it.", details={"field": "remote",
                                                                           "reason": "credentials_in_url"})
        return value


class SyncCommit(Result):
    decision_id: str
    op: str
    filename: str


class SyncConflict(Result):
    filename: str
    ours: str = Field(description="What the side before ======= is.")
    theirs: str = Field(description="What the side after ======= is.")
    resolve: str = Field(description="The command that resolves it.")


class RootSyncResult(Result):
    root_key: str
    path: str
    remote: str
    initialized: bool
    hand_edits: list[str] = Field(description="Decisions recorded for files changed on disk before committing.")
    committed: list[SyncCommit] = Field(description="One commit per decision applied since the last sync.")
    pulled: int = Field(description="Commits the pull brought from the remote.")
    arrived: list[str] = Field(description="Files the pull changed.")
    reconciled: list[str] = Field(description="Decisions (origin sync) recording what arrived.")
    conflicts: list[SyncConflict]
    pushed: bool


class AgentSyncResult(RootSyncResult):
    agent_name: str = Field(description="The agent whose global tier ($COMPOZY_HOME/agents/<name>/memory) this is.")


class SyncResult(RootSyncResult):
    agents: list[AgentSyncResult] = Field(default_factory=list, description=(
        "Each agent's global tier, synced with the same remote on branch agents/<name>: the tiers this machine has "
        "and those the remote has."))


def _root_result(report: engine.SyncReport, resolve: str) -> dict[str, Any]:
    return dict(
        root_key=report.root_key, path=report.path, remote=report.remote, initialized=report.initialized,
        hand_edits=report.hand_edits,
        committed=[SyncCommit(decision_id=c.decision_id, op=c.op, filename=c.filename) for c in report.committed],
        pulled=report.pulled, arrived=report.arrived, reconciled=report.reconciled,
        conflicts=[SyncConflict(filename=c.filename, ours=c.ours, theirs=c.theirs,
                                resolve=f"compozy memory resolve {c.filename} {resolve} --keep ours|theirs|both|edit")
                   for c in report.conflicts],
        pushed=report.pushed)


def memory_sync(*, data: SyncInput, caller: Caller) -> SyncResult:
    """Global memory, then every agent's global tier (the person's knowledge too, kept in $COMPOZY_HOME): the
    tiers this machine has and the ones another machine pushed (branches agents/<name> of the same remote)."""
    config = get_config(None)
    ref = ScopeRef(scope=Scope.GLOBAL)
    global_root = store_roots.root_path(ref, None)
    report = engine.sync_root(ref, global_root, config, remote=data.remote)
    url = engine.remote_url(global_root)
    local = [r.agent_name for r in administered_refs_across([]) if r.scope is Scope.AGENT]
    agents = []
    for name in sorted(set(local) | set(engine.remote_agents(global_root))):
        agent = ScopeRef(scope=Scope.AGENT, agent_name=name, agent_tier=AgentTier.GLOBAL)
        agent_report = engine.sync_root(agent, store_roots.root_path(agent, None), config, remote=url)
        agents.append(AgentSyncResult(agent_name=name, **_root_result(
            agent_report, f"--scope agent --agent {name} --agent-tier global")))
    return SyncResult(agents=agents, **_root_result(report, "--scope global"))


def sync_configured() -> bool:
    """Whether global memory has been synced on this machine (so a session stop or the schedule may sync it)."""
    return git.is_repository(store_roots.root_path(ScopeRef(scope=Scope.GLOBAL), None))


def sync_after_stop(sender: Any, **_: Any) -> None:
    """`memory.sync.after_session_stop`: queue a sync on the task cluster once a session stops."""
    if get_config(None).memory.sync.after_session_stop and sync_configured():
        from django_q.tasks import async_task

        async_task("memory.background.tasks.sync_global", task_name="compozy-memory-sync")


def connect_signals() -> None:
    from memory.sessions import signals

    signals.session_stopped.connect(sync_after_stop, dispatch_uid="compozy-sync-after-stop")
