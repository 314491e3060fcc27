"""`<ws>/.compozy/workspace.toml`: the durable identity of a workspace."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ulid import ULID

from compozy.config import compozy_home
from compozy.home import write_private
from memory.domain.errors import ValidationError, WorkspaceRequired
from memory.domain.models import format_timestamp, parse_timestamp, utc_now

WORKSPACE_FILE = Path(".compozy") / "workspace.toml"
_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def is_ulid(text: str) -> bool:
    return bool(_ULID.match(text or ""))


@dataclass(frozen=True)
class WorkspaceIdentity:
    id: str
    directory: Path
    created_at: str
    realpath_at_creation: str


_identities: dict[tuple[str, int, int], WorkspaceIdentity] = {}


def read_identity(directory: Path) -> WorkspaceIdentity:
    """Read a workspace.toml. An invalid file is an error, never a silent new identity."""
    path = directory / WORKSPACE_FILE
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = None
    if key is not None and key in _identities:
        return _identities[key]
    identity = _read_identity(directory, path)
    if key is not None:
        _identities[key] = identity
    return identity


def _read_identity(directory: Path, path: Path) -> WorkspaceIdentity:
    details = {"file": str(path), "reason": "workspace_toml"}
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(f"{path} is not valid TOML: {exc}", details=details) from None
    except OSError as exc:
        raise ValidationError(f"{path} cannot be read: {exc.strerror}", details=details) from None
    workspace_id = data.get("workspace_id")
    if not isinstance(workspace_id, str) or not is_ulid(workspace_id):
        raise ValidationError(f"{path}: workspace_id must be a 26-character ULID.",
                              details={**details, "key": "workspace_id"})
    unknown = set(data) - {"workspace_id", "created_at", "realpath_at_creation"}
    if unknown:
        raise ValidationError(
            f"{path}: unknown key {sorted(unknown)[0]!r}.", details={**details, "key": sorted(unknown)[0]}
        )
    try:
        created_at = parse_timestamp(data.get("created_at"))
    except ValueError:
        raise ValidationError(f"{path}: created_at must be an RFC 3339 timestamp.",
                              details={**details, "key": "created_at"}) from None
    realpath = data.get("realpath_at_creation")
    if not isinstance(realpath, str) or not realpath:
        raise ValidationError(f"{path}: realpath_at_creation is missing.",
                              details={**details, "key": "realpath_at_creation"})
    return WorkspaceIdentity(workspace_id, directory, created_at, realpath)


def find_workspace_dir(start: Path) -> Path | None:
    """The nearest ancestor (or start itself) holding .compozy/workspace.toml."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / WORKSPACE_FILE).is_file():
            return candidate
    return None


def find_checkout(start: Path) -> Path | None:
    """The enclosing git checkout (or start itself): a `.git` directory, or a `.git` file (worktrees, submodules)."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def new_workspace_dir(start: Path, *, operator_named: bool) -> Path:
    """Where a new workspace is created: the enclosing git checkout; any other directory only when the operator
    named it with --create-workspace. A memory write from an arbitrary directory (or a path sent over the socket)
    never turns that directory into a workspace."""
    if operator_named:
        return start.resolve()
    checkout = find_checkout(start)
    if checkout is None:
        raise WorkspaceRequired(
            f"{start} is not inside a git checkout, and a workspace is created only at one. Run inside the "
            "project's checkout, or name the directory as workspace with create_workspace.",
            details={"field": "workspace", "path": str(start), "reason": "not_a_checkout"},
        )
    return checkout


# Directories that hold the system, never a project: refused as a workspace (and anything below them), even when
# named with --create-workspace, even for root. /var/tmp and macOS's per-user temporary folders are not.
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
               "/sys", "/usr", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/run", "/var/lock",
               "/var/mail", "/var/backups", "/System", "/Library", "/private/etc", "/private/var/db",
               "/Applications")
# Shared parents of everyone's files: not a workspace themselves.
SYSTEM_PARENTS = ("/", "/var", "/opt", "/srv", "/home", "/Users", "/tmp", "/private", "/private/var", "/mnt",
                  "/media", "/Volumes")


def unsuitable_reason(directory: Path) -> str | None:
    """Why a directory cannot become a workspace, or None. `directory` is resolved (no links left)."""
    text = str(directory)
    if text in SYSTEM_PARENTS or any(text == d or text.startswith(d + "/") for d in SYSTEM_DIRS):
        return "system_directory"
    home = compozy_home().resolve()
    if (directory / ".compozy").resolve() == home or directory == home or home in directory.parents:
        return "compozy_home"
    if (directory / ".compozy").is_symlink():
        return "symlink_escape"
    # Git's rule for repositories (safe.directory): one owned by another user is not the caller's to change.
    if directory.stat().st_uid != os.geteuid():
        return "not_owner"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "not_writable"
    return None


def create_identity(directory: Path, *, replace: bool = False) -> WorkspaceIdentity:
    """Create workspace.toml exactly once, even when several processes race to create it. `replace`: a fork
    gives a copied checkout an identity of its own in place of the one it was copied with."""
    directory = directory.resolve()
    reason = unsuitable_reason(directory)
    if reason is not None:
        raise WorkspaceRequired(
            f"{directory} cannot be a workspace ({reason.replace('_', ' ')}). Run inside a project's git checkout "
            "that you own, or name a directory of your own as workspace with create_workspace.",
            details={"field": "workspace", "path": str(directory), "reason": reason},
        )
    target = directory / WORKSPACE_FILE
    text = (
        f'workspace_id = "{ULID()}"\n'
        f'created_at = "{format_timestamp(utc_now())}"\n'
        f"realpath_at_creation = {_toml_string(str(directory))}\n"
    )
    # Linked, not renamed: of several processes racing to create it, exactly one identity wins and the rest read it.
    write_private(target, text, replace=replace)
    return read_identity(directory)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
