"""`<ws>/.compozy/.gitignore`: what of a workspace's `.compozy/` a team shares through the project's git.

Shared: the curated memory files (`memory/`, the agents' workspace tiers), `workspace.toml` (the identity that
keys the catalog on every clone) and `config.toml`. Kept out: machine state and what is one person's:
- `_system/` at every level: dreaming reports, extractor dead letters, the archive, ad-hoc notes;
- `_inbox/`: the extractor's staging;
- `MEMORY.md`: derived from the catalog, re-rendered on every machine after a pull; tracked, it would conflict
  on every pair of concurrent adds;
- the checkpoint (`project_checkpoint_summary.md`): continuity for one person's sessions, rewritten by every
  session; shared, every pull of a teammate's session would conflict on it;
- the store's temp files.
"""

from __future__ import annotations

import os
from pathlib import Path

from compozy.home import PRIVATE_FILE
from memory.domain.checkpoint import CHECKPOINT_FILENAME
from memory.domain.names import INDEX_FILENAME

from .files import NO_FOLLOW, TEMP_SUFFIX, fsync_dir

GITIGNORE = Path(".compozy") / ".gitignore"
HEADER = ("# Written by Compozy: machine state and personal continuity stay out of git; curated memory and\n"
          "# workspace.toml are shared. Lines you add are kept; missing ones are appended on the next write.\n")
IGNORED = ("_system/", "_inbox/", INDEX_FILENAME, CHECKPOINT_FILENAME, f"*{TEMP_SUFFIX}")

# (directory, the file's mtime_ns and size) already checked by this process: a write costs one stat, not a read.
_checked: set[tuple[str, int, int]] = set()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.lstat(path)
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


def ensure_gitignore(workspace_dir: Path) -> bool:
    """Write `.compozy/.gitignore`, or append the lines it lacks; never rewrite what the person put there.
    Returns whether the file changed. A link or a non-file there is left alone (health reports links)."""
    return ensure_ignore_file(workspace_dir / GITIGNORE, IGNORED)


def ensure_ignore_file(path: Path, lines: tuple[str, ...], header: str = HEADER) -> bool:
    """`path` holds every one of `lines`: written with them, or the missing ones appended (`memory sync` keeps
    the global root's `.gitignore` this way too)."""
    stamp = _stamp(path)
    if stamp is not None and (str(path), *stamp) in _checked:
        return False
    if not path.parent.is_dir() or path.is_symlink():
        return False
    existing = ""
    if stamp is not None:
        if not path.is_file():
            return False
        existing = path.read_bytes().decode("utf-8", "replace")
    present = {line.strip() for line in existing.splitlines()}
    missing = [line for line in lines if line not in present]
    if missing:
        text = ("" if existing else header) + "\n".join(missing) + "\n"
        if existing and not existing.endswith("\n"):
            text = "\n" + text
        # Append only: a concurrent writer may have appended the same lines, which is harmless to git.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NO_FOLLOW, PRIVATE_FILE)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if stamp is None:
            fsync_dir(path.parent)
    stamp = _stamp(path)
    if stamp is not None:
        _checked.add((str(path), *stamp))
    return bool(missing)
