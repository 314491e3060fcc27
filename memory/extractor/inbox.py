"""The extractor's inbox and dead letters on disk: the only writer of `_inbox/` and `_system/extractor/failures/`.

Layout, in the global memory root (the only root with an inbox):
- `_inbox/<session>/<UTC timestamp>-<until_seq>.jsonl`: staged candidates, written whole by the atomic-write
  helper (temp file, fsync, rename), so a reader sees a complete file or none;
- `_inbox/<session>/<…>.jsonl.processing`: a file a drain has claimed by renaming it. A drain that dies leaves
  it there, and the next drain (which holds the drain lock, so no other drain is alive) finishes it;
- `_system/extractor/failures/<timestamp>-<file>.json`: a dead letter, `FailureRecord`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memory.controller import faults
from memory.domain.errors import NotFound, ValidationError
from memory.domain.extraction import FailureRecord, FailureSource, FailureStage, valid_session_id
from memory.domain.models import format_timestamp, utc_now
from memory.domain.names import SYSTEM_DIR
from memory.store import files

INBOX_DIR = "_inbox"
FAILURES_DIR = f"{SYSTEM_DIR}/extractor/failures"
STAGED_SUFFIX = ".jsonl"
CLAIMED_SUFFIX = ".jsonl.processing"
# A temp file this old belongs to a stager that died between its write and its rename; younger ones may be live.
# An empty session directory this old belongs to a session that stopped.
STALE_TEMP_SECONDS = 3600
SWEEP_INTERVAL_SECONDS = 60
_last_sweep: float | None = None  # time.monotonic() of this process's last sweep


def file_timestamp(moment: datetime) -> str:
    """Sortable to the microsecond, so files staged in one second keep their order."""
    return moment.strftime("%Y%m%dT%H%M%S") + f"{moment.microsecond:06d}Z"


@dataclass(frozen=True)
class InboxFile:
    session: str
    path: Path

    @property
    def claimed(self) -> bool:
        return self.path.name.endswith(CLAIMED_SUFFIX)

    @property
    def staged_name(self) -> str:
        """The name it was staged under, whether claimed or not."""
        return self.path.name.removesuffix(".processing")

    @property
    def relative(self) -> str:
        return f"{INBOX_DIR}/{self.session}/{self.staged_name}"

    def sort_key(self) -> tuple[str, str]:
        return (self.staged_name, self.session)


def stage(root: Path, *, session: str, until_seq: int, lines: list[str], now: datetime | None = None) -> InboxFile:
    valid_session_id(session)
    moment = now or utc_now()
    directory = root / INBOX_DIR / session
    path = directory / f"{file_timestamp(moment)}-{until_seq}{STAGED_SUFFIX}"
    text = "".join(line + "\n" for line in lines)
    for attempt in range(2):
        try:
            if not directory.is_dir():
                # A new session directory must survive a crash as much as the file in it.
                files.ensure_dir(directory)
                files.fsync_dir(directory.parent)
            files.atomic_write(path, text, step=_stage_step)
            break
        except FileNotFoundError:
            # A drain removed the session's emptied directory between our mkdir and our temp file; once more.
            if attempt:
                raise
    return InboxFile(session, path)


def _stage_step(step: str) -> None:
    faults.hit(f"stage_{step}")


# A session directory's (inode, mtime, ctime) when it was last listed and held no staged or claimed file. Creating,
# renaming or removing an entry changes a directory's mtime and ctime, so a directory whose stat is unchanged still
# holds none and is not read again: a drain lists the inbox twice (its second pass finds what was staged meanwhile)
# and every session directory stays for an hour, so most of a listing would otherwise read emptied directories.
_quiet: dict[str, tuple[int, int, int]] = {}
# Only a directory whose last change is older than the listing by more than one tick of the file system's clock is
# remembered: a change within the tick of the previous one can leave the timestamps as they were (the "racy" case).
# ctime, which no one can set, is the kernel's time of the change. A ctime on a 10 ms boundary may come from a
# file system that keeps seconds or hundredths (FAT, exFAT, ext3's small inodes): two seconds then; a finer one is
# the kernel's coarse clock (one tick is 1-10 ms), so 50 ms. Under a steady stream of turns the directory of the
# session being drained is listed every time and the others once they have been quiet for that margin.
QUIET_AFTER_NS = 50_000_000
QUIET_AFTER_COARSE_NS = 2_000_000_000


def _settled(info: os.stat_result, started_ns: int) -> bool:
    coarse = info.st_ctime_ns % 10_000_000 == 0
    margin = QUIET_AFTER_COARSE_NS if coarse else QUIET_AFTER_NS
    return max(info.st_mtime_ns, info.st_ctime_ns) < started_ns - margin


def inbox_files(root: Path) -> list[InboxFile]:
    """Staged and claimed files, oldest first. Temp files (a stage in progress, or a dead stager's) never are.

    Runs once per drain pass, over every session directory: `os.scandir` reads each entry's type from the directory
    itself, where `Path.iterdir` + `is_dir`/`is_file` made a stat call per entry. A directory that was quiet (see
    `_quiet`) costs one stat instead of a listing."""
    global _quiet
    found: list[InboxFile] = []
    started = time.time_ns()
    try:
        sessions = os.scandir(root / INBOX_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return found
    quiet, still_quiet = _quiet, {}
    with sessions:
        for session_dir in sessions:
            if session_dir.name.startswith(".") or not session_dir.is_dir(follow_symlinks=False):
                continue
            info = session_dir.stat(follow_symlinks=False)  # taken before the listing: a later change shows in it
            state = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
            if quiet.get(session_dir.path) == state:
                still_quiet[session_dir.path] = state
                continue
            listed = len(found)
            with os.scandir(session_dir.path) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or not (name.endswith(STAGED_SUFFIX) or name.endswith(CLAIMED_SUFFIX)):
                        continue
                    if entry.is_file(follow_symlinks=False):
                        found.append(InboxFile(session_dir.name, Path(entry.path)))
            if len(found) == listed and _settled(info, started):
                still_quiet[session_dir.path] = state
    _quiet = still_quiet  # only this listing's directories: a removed one is forgotten
    return sorted(found, key=InboxFile.sort_key)


def claim(item: InboxFile) -> InboxFile | None:
    """Take a staged file by renaming it; None when it is gone (claimed or replayed meanwhile)."""
    if item.claimed:
        return item
    target = item.path.with_name(item.path.name + ".processing")
    try:
        # Not fsync'd: a claim lost in a machine crash leaves the file staged, and draining it again returns the
        # decisions already made (`submit(once=True)`).
        files.rename_file(item.path, target, durable=False)
    except FileNotFoundError:
        return None
    return InboxFile(item.session, target)


def finish(item: InboxFile) -> None:
    # Not fsync'd either, for the same reason: a drained file that reappears after a crash is drained idempotently.
    # Its emptied session directory stays for the session's next run; remove_stale_temps sweeps old empty ones.
    files.remove_file(item.path, durable=False)


def remove_stale_temps(root: Path) -> int:
    """Remove temp files older than STALE_TEMP_SECONDS and session directories idle that long.

    Every drain calls it, but it walks the whole inbox at most once per SWEEP_INTERVAL_SECONDS in a process:
    what it removes is an hour old, and a walk on every drain cost a stat per entry once per turn of a fast
    session."""
    global _last_sweep
    now = time.monotonic()
    if _last_sweep is not None and now - _last_sweep < SWEEP_INTERVAL_SECONDS:
        return 0
    _last_sweep = now
    removed = 0
    inbox = root / INBOX_DIR
    cutoff = time.time() - STALE_TEMP_SECONDS
    if not inbox.is_dir():
        return removed
    for session_dir in inbox.iterdir():
        if not session_dir.is_dir():
            continue
        for entry in session_dir.iterdir():
            if entry.name.endswith(files.TEMP_SUFFIX) and entry.stat().st_mtime < cutoff:
                files.remove_file(entry)
                removed += 1
        if session_dir.stat().st_mtime < cutoff:
            files.remove_empty_dir(session_dir)  # a session idle this long; its next run recreates it
    return removed


# ---------------------------------------------------------------------------------------------------------------
# Dead letters


def record_failure(root: Path, *, stage: FailureStage, source: FailureSource, error: str, content: str,
                   name_hint: str, now: datetime | None = None) -> str:
    """Write a dead letter and return its name (the id `replay` takes)."""
    moment = now or utc_now()
    record = FailureRecord(stage=stage, source=source, error=error, content=content,
                           recorded_at=format_timestamp(moment))
    directory = root / FAILURES_DIR
    base = f"{file_timestamp(moment)}-{name_hint}"
    name = f"{base}.json"
    counter = 1
    while (directory / name).exists():
        counter += 1
        name = f"{base}-{counter}.json"
    files.atomic_write(directory / name, json.dumps(record.model_dump(mode="json"), ensure_ascii=False, indent=2)
                       + "\n")
    return name


def fail_file(root: Path, item: InboxFile, *, stage: FailureStage, source: FailureSource, error: str) -> str:
    """Move a claimed file into the dead letters: the record is written before the file is removed, so a crash
    between the two leaves the file to be drained again, never lost."""
    try:
        content = item.path.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        content = ""
    source = source.model_copy(update={"file": item.relative})
    name = record_failure(root, stage=stage, source=source, error=error, content=content,
                          name_hint=item.staged_name)
    finish(item)
    return name


def _validate_failure_name(name: str) -> str:
    if not name or "/" in name or name.startswith(".") or not name.endswith(".json") or ".." in name:
        raise ValidationError("A failure id is the name of a file under _system/extractor/failures/.",
                              details={"field": "failure", "failure": name})
    return name


def failure_names(root: Path) -> list[str]:
    directory = root / FAILURES_DIR
    if not directory.is_dir():
        return []
    return sorted(name for name in os.listdir(directory)
                  if name.endswith(".json") and not name.startswith("."))


def read_failure(root: Path, name: str) -> FailureRecord:
    path = root / FAILURES_DIR / _validate_failure_name(name)
    try:
        return FailureRecord.model_validate_json(path.read_text("utf-8"))
    except FileNotFoundError:
        raise NotFound(f"No extractor failure {name}.", details={"failure": name}) from None
    except ValueError as exc:
        raise ValidationError(f"The failure record {name} is not valid: {str(exc).splitlines()[0]}",
                              details={"failure": name, "reason": "invalid_record"}) from None


def remove_failure(root: Path, name: str) -> None:
    files.remove_file(root / FAILURES_DIR / _validate_failure_name(name))
