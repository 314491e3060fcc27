"""Where a call runs: the caller's workspace (from --workspace, a path, or the current directory; created on a
workspace write when allowed), registered with its current path, and the configuration that applies there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compozy.config import Config, compozy_home, get_config
from memory.controller.events import event_record
from memory.controller.freshness import catch_up
from memory.domain.document import Limits
from memory.domain.enums import EventOp, Origin, Scope
from memory.domain.errors import ScopeInvalid, ValidationError, WorkspaceCopied, WorkspaceRequired
from memory.domain.models import ScopeRef, utc_now
from memory.models import Workspace
from memory.store import roots as store_roots
from memory.store.sharing import ensure_gitignore
from memory.store.workspace import (
    WorkspaceIdentity,
    create_identity,
    find_workspace_dir,
    is_ulid,
    new_workspace_dir,
    read_identity,
)

from .inputs import Caller, Selector


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

    @property
    def limits(self) -> Limits:
        """The size limits a memory body is held to here."""
        return Limits(self.config.memory.file.max_lines, self.config.memory.file.max_bytes)

    def root(self, ref: ScopeRef) -> Path:
        return store_roots.root_path(ref, self.workspace_dir)


@dataclass(frozen=True)
class KnownWorkspace:
    """A workspace this machine has registered (memory_workspaces): its ULID, the path last seen for it, and that
    directory when it still holds this workspace (None when it was moved or removed since)."""

    id: str
    path: str
    directory: Path | None

    @classmethod
    def of(cls, identity: WorkspaceIdentity) -> KnownWorkspace:
        return cls(id=identity.id, path=str(identity.directory), directory=identity.directory)


def known_workspaces() -> list[KnownWorkspace]:
    """Every registered workspace, by path. A row whose directory no longer holds that workspace (moved, deleted,
    or a different workspace.toml there now) is kept, without a directory: its catalog rows and decisions are
    still keyed by its ULID."""
    known = []
    for workspace_id, path in Workspace.objects.order_by("path", "id").values_list("id", "path"):
        directory: Path | None = Path(path)
        try:
            if read_identity(directory).id != workspace_id:
                directory = None
        except ValidationError:
            directory = None  # no readable workspace.toml there any more
        known.append(KnownWorkspace(id=workspace_id, path=path, directory=directory))
    return known


@dataclass(frozen=True)
class Span:
    """The workspaces one read covers: the caller's own (or none), as `resolve` finds it, or with all_workspaces
    every workspace this machine knows. Either way each is named by its ULID, so every query stays keyed by
    explicit workspace ids; `config` is the caller's (the home configuration across workspaces)."""

    resolved: Resolved
    workspaces: tuple[KnownWorkspace, ...]
    across: bool

    @property
    def config(self) -> Config:
        return self.resolved.config

    @property
    def workspace_ids(self) -> list[str]:
        return [workspace.id for workspace in self.workspaces]

    @property
    def event_workspace_ids(self) -> list[str]:
        """The global events and those of each covered workspace."""
        return ["", *self.workspace_ids]


def resolve_span(workspace: str | None, caller: Caller, *, all_workspaces: bool, fresh: bool = True) -> Span:
    if not all_workspaces:
        resolved = resolve(Selector(workspace=workspace), caller, fresh=fresh)
        own = (KnownWorkspace.of(resolved.workspace),) if resolved.workspace else ()
        return Span(resolved=resolved, workspaces=own, across=False)
    if workspace:
        raise ValidationError("Give workspace or all_workspaces, not both.",
                              details={"field": "all_workspaces", "reason": "with_workspace"})
    if caller.origin is Origin.TOOL:
        # The spec's read precedence for an agent: global, its workspace, its own tiers. Never other projects.
        raise ScopeInvalid("all_workspaces is the operator's view; an agent reads its own workspace.",
                           details={"field": "all_workspaces", "reason": "operator_only"})
    return Span(resolved=Resolved(None, get_config(None)), workspaces=tuple(known_workspaces()), across=True)


def confined_to(named: object, *, own: str | None, caller: Caller) -> bool:
    """Whether a workspace a confined caller named is its own workspace (`own`, or the one around its cwd), by
    ULID or by any path inside it. Anything that does not resolve to that same workspace is another one: an
    unknown id, a directory without a workspace (a write could create one there), or no own workspace at all."""
    if not isinstance(named, str):
        return False
    try:
        mine = resolve_workspace(own, caller, create=False)
        theirs = resolve_workspace(named, caller, create=False)
    except (ValidationError, WorkspaceRequired):
        return False
    return mine is not None and theirs is not None and mine.id == theirs.id


def narrowed_to_global(scope: Scope | None, resolved: Resolved, caller: Caller, *, done: str) -> str | None:
    """Outside any workspace a read sees global memory only. Said, because an empty or thin answer from the wrong
    directory otherwise looks like the project's memory has nothing. `done` names the read: "searched", "listed"."""
    if resolved.workspace is not None or scope is not None:
        return None
    where = f" from {caller.cwd}" if caller.cwd else ""
    return (f"no workspace found{where}: only global memories were {done} (run it inside a project, or name one "
            "with workspace)")


def resolve(selector: Selector, caller: Caller, *, create_workspace: bool = False, fresh: bool = True) -> Resolved:
    """`fresh`: reconcile what changed on disk since the roots were last in step first. Health (which reports
    that drift) and reindex (which reconciles everything itself) pass False."""
    # Only a write's input carries create_workspace (memory write): no read, and no agent tool, can name one.
    workspace = resolve_workspace(selector.workspace, caller, create=create_workspace,
                                  operator_named=getattr(selector, "create_workspace", False))
    config = get_config(workspace.directory if workspace else None)
    resolved = Resolved(workspace, config)
    # What a pull brought while no watcher ran becomes decisions before this call reads the catalog: one stat of
    # each root directory when nothing changed (memory/controller/freshness.py).
    refs = [ScopeRef(scope=Scope.GLOBAL)]
    if workspace is not None:
        refs.append(ScopeRef(scope=Scope.WORKSPACE, workspace_id=workspace.id))
    for ref in refs if fresh else ():
        catch_up(ref, resolved.root(ref), config)
    return resolved


def _auto_create() -> bool:
    return get_config(None).memory.workspace.auto_create


def resolve_workspace(spec: str | None, caller: Caller, *, create: bool,
                      operator_named: bool = False) -> WorkspaceIdentity | None:
    """The workspace of a call. `create`: the call writes workspace memory, so a missing workspace may be created
    (at the enclosing git checkout; elsewhere only when `operator_named`). A path named explicitly that holds no
    workspace is an error for every other call, never a silent global-only answer."""
    identity: WorkspaceIdentity | None = None
    if spec:
        if is_ulid(spec):
            path = Workspace.objects.filter(id=spec).values_list("path", flat=True).first()
            if path is None or not (Path(path) / ".compozy" / "workspace.toml").is_file():
                raise WorkspaceRequired(
                    f"Workspace {spec} is not known on this machine: give its path as workspace instead.",
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
                    f"workspace {spec!r} is neither a known workspace id nor a directory.",
                    details={"workspace": spec, "reason": "not_a_directory"},
                )
            found = find_workspace_dir(path)
            if found is not None:
                identity = read_identity(found)
            elif create and _auto_create():
                identity = create_identity(new_workspace_dir(path, operator_named=operator_named))
            else:
                raise WorkspaceRequired(
                    f"workspace {spec} holds no workspace yet. A write of workspace memory there creates one "
                    "(at its git checkout, or anywhere of yours with create_workspace).",
                    details={"field": "workspace", "workspace": spec, "reason": "no_workspace"},
                )
    elif caller.cwd is not None:
        found = find_workspace_dir(caller.cwd)
        if found is not None:
            identity = read_identity(found)
        elif create and _auto_create():
            identity = create_identity(new_workspace_dir(caller.cwd, operator_named=operator_named))
    if identity is not None:
        register_workspace(identity)
        if create:
            # A write keeps the workspace shareable through git: on creation, and for older workspaces on their next
            # write (missing lines appended, the person's own lines kept).
            ensure_gitignore(identity.directory)
    return identity


_registered: set[tuple[str, str, str]] = set()


def copied_from(identity: WorkspaceIdentity) -> str | None:
    """The path a workspace is registered at when that is elsewhere and still holds the same identity: `identity`
    was read from a copy of that checkout (cp -r carries workspace.toml). None otherwise (registered here, not
    registered, or moved: nothing holds it at the registered path any more)."""
    here = str(identity.directory.resolve())
    known = Workspace.objects.filter(id=identity.id).values_list("path", flat=True).first()
    if known is None or known == here:
        return None
    try:
        still_there = read_identity(Path(known)).id == identity.id
    except Exception:  # noqa: BLE001 - any unreadable workspace.toml there means the workspace left that path
        still_there = False
    return known if still_there else None


def refuse_copy(identity: WorkspaceIdentity) -> None:
    """A copied checkout never acts as its original: no read of it, no reindex recording deletes for the
    original's memories, no write landing in the original's root. It waits for an explicit adopt or fork."""
    original = copied_from(identity)
    if original is None:
        return
    here = str(identity.directory.resolve())
    raise WorkspaceCopied(
        f"{here} carries the identity of workspace {identity.id}, which is registered at {original} and still "
        "there: this is a copy. Run `compozy workspace adopt` here if the workspace moved here, or `compozy "
        "workspace fork` to give this copy an identity (and memories) of its own.",
        details={"reason": "workspace_copied", "workspace": identity.id, "path": here,
                 "registered_path": original})


def register_workspace(identity: WorkspaceIdentity) -> None:
    """Remember where a workspace lives now. A move keeps its memory (the ULID is the key) and is recorded; a copy
    whose original is still at the registered path is refused (`refuse_copy`)."""
    here = str(identity.directory.resolve())
    seen = (str(compozy_home()), identity.id, here)
    if seen in _registered:
        return  # this process already recorded the workspace at this path
    known = Workspace.objects.filter(id=identity.id).values_list("path", flat=True).first()
    if known == here:
        _registered.add(seen)
        return
    refuse_copy(identity)
    relocate(identity, known)


def relocate(identity: WorkspaceIdentity, known: str | None, *, adopted: bool = False) -> None:
    """Point the registration at the identity's directory, recording the move."""
    here = str(identity.directory.resolve())
    _registered.discard((str(compozy_home()), identity.id, known or ""))
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
            metadata={"from": previous, "to": here, "realpath_at_creation": identity.realpath_at_creation,
                      **({"adopted": True} if adopted else {})},
        )
