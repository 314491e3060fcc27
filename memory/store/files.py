"""The disk. Nothing writes under a memory root except through `atomic_write` and `remove_file` here, and
those are called only by the controller's apply step (and its MEMORY.md renderer)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from compozy.config import compozy_home
from compozy.home import (
    PRIVATE_FILE,
    TEMP_SUFFIX,
    commit_private,
    discard_temp,
    fsync_dir,
    private_dir,
    reserve_private,
)
from memory.domain.errors import Conflict, ValidationError
from memory.domain.names import INDEX_FILENAME, SYSTEM_DIR, document_kind

Step = Callable[[str], None]
SYMLINK_REASON = "symlink_escape"
# Every open under a memory root: never through a symlink (a repository can ship `.compozy/memory/MEMORY.md` as a
# link to any file of the user who runs an agent in it), never left open across an exec.
NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
# How far above a root its directories are checked for links: `memory`, `agents/<name>/memory`, up to `.compozy`.
_ROOT_DEPTH = 4


def _noop_step(_: str) -> None:
    return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ensure_dir(path: Path) -> None:
    """A directory of a memory root (or above it, up to `.compozy`): each one created is 0700."""
    private_dir(path)


def symlink_refused(filename: str) -> ValidationError:
    return ValidationError(
        "A memory root never follows symlinks; replace the link with the file itself.",
        details={"field": "filename", "filename": filename, "reason": SYMLINK_REASON},
    )


def check_root(root: Path) -> None:
    """Refuse a root whose directory, or a directory between it and its workspace's `.compozy` (or
    $COMPOZY_HOME, which the operator chose and is trusted), is a symlink: writing through one would create files
    wherever the link points."""
    home = compozy_home()
    current = root
    for _level in range(_ROOT_DEPTH):
        if current == home:
            return
        if current.is_symlink():
            raise symlink_refused(current.name)
        if current.name == ".compozy" or current.parent == current:
            return
        current = current.parent


def _open(path: Path, flags: int, filename: str) -> int:
    try:
        return os.open(path, flags | NO_FOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_refused(filename) from None
        raise


def read_path(path: Path, filename: str) -> tuple[bytes, os.stat_result] | None:
    """A regular file's bytes and its stat, from one descriptor opened without following a link; None when
    missing. O_NONBLOCK: a FIFO under a memory name must not hang the reader (it is refused by the fstat)."""
    try:
        fd = _open(path, os.O_RDONLY | os.O_NONBLOCK, filename)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if stat_module.S_ISDIR(info.st_mode):
            raise ValidationError("The filename names a directory.",
                                  details={"filename": filename, "reason": "directory"})
        if not stat_module.S_ISREG(info.st_mode):
            raise ValidationError("The filename names something other than a regular file.",
                                  details={"filename": filename, "reason": "not_a_file"})
        chunks = []
        while chunk := os.read(fd, max(info.st_size, 65536)):
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


def read_regular_range(path: Path, offset: int, limit: int) -> tuple[bytes, int]:
    """Up to `limit` bytes of a regular file from `offset`, and the file's size, from one descriptor. A client's
    file outside every memory root (a transcript), so links are followed; but O_NONBLOCK and the fstat mean a FIFO
    or a device (/dev/zero) is refused at once instead of blocking or streaming without end. A file now shorter
    than `offset` (rewritten) is read from its start: the caller compares the size with its offset."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            raise ValidationError("The path names something other than a regular file.",
                                  details={"filename": path.name, "reason": "not_a_file"})
        start = offset if offset <= info.st_size else 0
        chunks, wanted = [], max(0, min(limit, info.st_size - start))
        while wanted > 0 and (chunk := os.pread(fd, wanted, start)):
            chunks.append(chunk)
            start += len(chunk)
            wanted -= len(chunk)
        return b"".join(chunks), info.st_size
    finally:
        os.close(fd)


def read_index_text(path: Path) -> str | None:
    """MEMORY.md (or another root-level artifact) as text; None when it is missing, a link, not a regular file
    or not UTF-8. Callers then render it whole, or build it from the catalog: a link is never read."""
    try:
        found = read_path(path, path.name)
    except ValidationError:
        return None
    if found is None:
        return None
    try:
        return found[0].decode("utf-8")
    except UnicodeDecodeError:
        return None


def atomic_write(path: Path, text: str, *, step: Step = _noop_step) -> None:
    """Temp file in the same directory (0600), fsync, rename over the target, fsync the directory: the home's one
    private writer (`compozy/home.py: write_private`), with the crash tests' boundaries.

    The rename replaces a symlink at the target, never what it points to. `step` is called at each boundary so
    the crash tests can kill the writer there.
    """
    commit_reserved(reserve_write(path, text), path, step=step)


def reserve_write(path: Path, text: str) -> Path:
    """Write `text` to a durable temp file beside `path` and return it: the bytes are on the disk before anyone
    relies on them (the controller reserves a file's space before it commits the decision). A write that fails
    (a full disk, a read-only filesystem) removes its temp file, so no 0-byte leftover stays behind."""
    ensure_dir(path.parent)
    return reserve_private(path, text.encode("utf-8"))


def commit_reserved(temp: Path, path: Path, *, step: Step = _noop_step) -> None:
    """Rename a reserved temp file over its target and fsync the directory."""
    step("after_temp_write")
    commit_private(temp, path)
    step("after_rename")


def write_marker(path: Path, text: str) -> None:
    """A small marker under $COMPOZY_HOME/run (never in a memory root), not fsync'd: it only has to outlive its
    writer being killed, which the page cache does. The file stays between uses and is rewritten in place (an
    empty marker is no marker): creating and unlinking an inode on every write waited on the journal commit that
    the write's own fsyncs had just started."""
    ensure_dir(path.parent)
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | NO_FOLLOW, PRIVATE_FILE)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def read_marker(path: Path) -> str | None:
    """The marker's text, or None when there is none (no file, or an empty one)."""
    try:
        return path.read_text(encoding="utf-8") or None
    except FileNotFoundError:
        return None


def remove_marker(path: Path) -> None:
    """Empty the marker (the file stays, for the next write_marker to rewrite in place)."""
    try:
        fd = os.open(path, os.O_WRONLY | NO_FOLLOW)
    except FileNotFoundError:
        return
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def discard_reserved(temp: Path) -> None:
    discard_temp(temp)


def append_durably(path: Path, text: str) -> bool:
    """Append to an existing regular file and fsync it; False (nothing written) when the path is a link or not a
    regular file, so the caller renders the file whole instead. Used for MEMORY.md's one-line additions; a torn
    append (a crash mid-write) leaves a last line without its newline, which the next update detects and repairs
    by re-rendering."""
    try:
        fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK, path.name)
    except (ValidationError, FileNotFoundError):
        return False
    try:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def read_tail(path: Path, size: int) -> tuple[int, bytes] | None:
    """The size and last `size` bytes of a regular file; None when missing, a link or not a regular file."""
    try:
        fd = _open(path, os.O_RDONLY | os.O_NONBLOCK, path.name)
    except (ValidationError, FileNotFoundError):
        return None
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            return None
        return info.st_size, os.pread(fd, size, max(0, info.st_size - size))
    finally:
        os.close(fd)


def make_private(path: Path) -> None:
    """Give a memory file that something else put in a root (a git pull or checkout, an editor under a 022 umask)
    the mode of the files the controller writes, 0600. Only a regular file, never through a link; a file that is
    gone, or not this user's to change, is left as it is. The mode is metadata: the file's bytes and mtime, which
    the catalog compares, do not change."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | NO_FOLLOW)
    except OSError:
        return  # missing, or a link (ELOOP): health reports a link; there is nothing to tighten
    try:
        info = os.fstat(fd)
        if stat_module.S_ISREG(info.st_mode) and stat_module.S_IMODE(info.st_mode) != PRIVATE_FILE:
            with contextlib.suppress(PermissionError):
                os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def remove_file(path: Path, *, step: Step = _noop_step, durable: bool = True) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    else:
        if durable:
            fsync_dir(path.parent)
    step("after_rename")


def rename_file(source: Path, target: Path, *, durable: bool = True) -> None:
    """Rename; with `durable`, fsync the directories so the new name survives a machine crash. Callers whose
    rename is safe to lose (the next run redoes it idempotently) skip the fsync."""
    ensure_dir(target.parent)
    os.replace(source, target)
    if durable:
        fsync_dir(target.parent)
        if source.parent != target.parent:
            fsync_dir(source.parent)


def remove_empty_dir(path: Path) -> bool:
    """Remove a directory only if it is empty; a directory that gained a file meanwhile is left alone."""
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def remove_stale_temp_files(root: Path) -> int:
    """Only safe while holding the write lock: then no writer can be between its temp write and its rename."""
    removed = 0
    for directory in (root, root / SYSTEM_DIR):
        if directory.is_symlink() or not directory.is_dir():
            continue
        for dirpath, _dirs, names in os.walk(directory):
            for name in names:
                if name.endswith(TEMP_SUFFIX):
                    os.unlink(os.path.join(dirpath, name))
                    removed += 1
            if Path(dirpath) == root:
                _dirs[:] = [d for d in _dirs if d == SYSTEM_DIR]
    return removed


def safe_path(root: Path, filename: str) -> Path:
    """The path of a file under a root, refusing a symlink anywhere on the way: the file itself, a directory
    below the root, the root or the directories above it up to `.compozy`. Even a link that points inside the
    root today is refused: it can be re-pointed between this check and the open. Opens add O_NOFOLLOW."""
    check_root(root)
    path = root / filename
    if path.is_symlink() or any(parent.is_symlink() for parent in _parents_below(root, path)):
        raise symlink_refused(filename)
    return path


def _parents_below(root: Path, path: Path) -> Iterator[Path]:
    parent = path.parent
    while parent != root and root in parent.parents:
        yield parent
        parent = parent.parent


def read_file(root: Path, filename: str) -> tuple[bytes, os.stat_result] | None:
    return read_path(safe_path(root, filename), filename)


def read_bytes(root: Path, filename: str) -> bytes | None:
    found = read_file(root, filename)
    return None if found is None else found[0]


def decode_stored(raw: bytes, filename: str) -> str:
    """A stored document's text. A hand-placed file that is not UTF-8 is a conflict with the disk (409), never a
    crash: it is reported, never rewritten, until someone fixes it by hand."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Conflict(
            f"{filename} on disk is not valid UTF-8; it is never overwritten. Fix or remove it by hand, then retry.",
            details={"filename": filename, "reason": "encoding"},
        ) from None


def read_text(root: Path, filename: str) -> str | None:
    raw = read_bytes(root, filename)
    return None if raw is None else decode_stored(raw, filename)


@dataclass
class RootListing:
    """One pass over a root's directory: its memory documents (with size and mtime when stat-ed), the kind each
    name declares, and the other top-level files health reports."""

    documents: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)
    links: set[str] = field(default_factory=set)  # documents that are symlinks (never read; health reports them)


def scan_root(root: Path, *, include_system: bool = False, with_stat: bool = False) -> RootListing:
    """List a root once. Without `with_stat` no file is stat-ed; with it, a document whose stat fails (a broken
    symlink, a file deleted meanwhile) maps to None."""
    listing = RootListing()
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return listing
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return listing  # a symlinked root lists nothing; health reports the link (check_root)
        raise
    try:
        # scandir over a directory descriptor: each entry.stat() is an fstatat() relative to it, the cheapest
        # stat there is, which matters because health stats every file of every root on each call.
        with os.scandir(fd) as entries:
            documents, kinds, others = listing.documents, listing.kinds, listing.others
            for entry in entries:
                name = entry.name
                if name == INDEX_FILENAME or name[0] == ".":
                    continue
                # Ordered for the common case, a regular file: one d_type check per entry, no syscall.
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    kind = document_kind(name)
                    if kind is None:
                        others.append(name)
                        continue
                    kinds[name] = kind
                    if entry.is_symlink():
                        listing.links.add(name)
                    if with_stat:
                        try:
                            stat = entry.stat()
                            documents[name] = (stat.st_size, stat.st_mtime_ns)
                        except OSError:
                            documents[name] = None
                    else:
                        documents[name] = None
                elif not entry.is_dir(follow_symlinks=False) and document_kind(name) is None:
                    others.append(name)  # a FIFO or device under a memory name is never opened or listed
    finally:
        os.close(fd)
    if include_system and not (root / SYSTEM_DIR).is_symlink():
        for dirpath, _dirs, names in os.walk(root / SYSTEM_DIR):
            rel_dir = Path(dirpath).relative_to(root).as_posix()
            for name in names:
                if name.endswith(".md") and not name.startswith(".") and not name.endswith(TEMP_SUFFIX):
                    relative = f"{rel_dir}/{name}"
                    listing.kinds[relative] = document_kind(name) or "system"
                    listing.documents[relative] = _stat(os.path.join(dirpath, name)) if with_stat else None
    listing.others.sort()
    return listing


def _stat(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def list_document_names(root: Path, *, include_system: bool = False) -> list[str]:
    """Filenames of memory documents in a root (relative), without MEMORY.md, temp files or other files."""
    return sorted(scan_root(root, include_system=include_system).documents)


def make_scope_dirs(root: Path, *, with_inbox: bool = False) -> None:
    """Each root gets its `_system/` layout on first write."""
    for sub in ("dreaming", "extractor/failures", "ad_hoc", "archive"):
        ensure_dir(root / SYSTEM_DIR / sub)
    if with_inbox:
        ensure_dir(root / "_inbox")
