"""`<ws>/.compozy/workspace.toml`: the durable identity of a workspace."""

from __future__ import annotations

import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ulid import ULID

from compozy.config import compozy_home
from memory.domain.errors import ValidationError, WorkspaceRequired
from memory.domain.models import format_timestamp, parse_timestamp, utc_now

from .files import fsync_dir

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
        raise ValidationError(f"{path}: workspace_id must be a 26-character ULID.", details={**details, "key": "workspace_id"})
    unknown = set(data) - {"workspace_id", "created_at", "realpath_at_creation"}
    if unknown:
        raise ValidationError(
            f"{path}: unknown key {sorted(unknown)[0]!r}.", details={**details, "key": sorted(unknown)[0]}
        )
    try:
        created_at = parse_timestamp(data.get("created_at"))
    except ValueError:
        raise ValidationError(f"{path}: created_at must be an RFC 3339 timestamp.", details={**details, "key": "created_at"}) from None
    realpath = data.get("realpath_at_creation")
    if not isinstance(realpath, str) or not realpath:
        raise ValidationError(f"{path}: realpath_at_creation is missing.", details={**details, "key": "realpath_at_creation"})
    return WorkspaceIdentity(workspace_id, directory, created_at, realpath)


def find_workspace_dir(start: Path) -> Path | None:
    """The nearest ancestor (or start itself) holding .compozy/workspace.toml."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / WORKSPACE_FILE).is_file():
            return candidate
    return None


def default_workspace_dir(start: Path) -> Path:
    """Where a new workspace is created: the enclosing git checkout, else the directory itself."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return current


def create_identity(directory: Path) -> WorkspaceIdentity:
    """Create workspace.toml exactly once, even when several processes race to create it."""
    directory = directory.resolve()
    if directory == Path(directory.anchor) or (directory / ".compozy").resolve() == compozy_home().resolve():
        raise WorkspaceRequired(
            f"{directory} cannot be a workspace (it would collide with COMPOZY_HOME or the filesystem root). "
            "Give workspace (a project directory) or run inside a project directory.",
            details={"field": "workspace", "path": str(directory), "reason": "unsuitable_directory"},
        )
    target = directory / WORKSPACE_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f'workspace_id = "{ULID()}"\n'
        f'created_at = "{format_timestamp(utc_now())}"\n'
        f"realpath_at_creation = {_toml_string(str(directory))}\n"
    )
    temp = target.parent / f".workspace.toml.{os.getpid()}.{secrets.token_hex(4)}.compozy-tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        # link() fails if the target exists, so exactly one racer's identity wins and the rest read it.
        os.link(temp, target)
        fsync_dir(target.parent)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)
    return read_identity(directory)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
