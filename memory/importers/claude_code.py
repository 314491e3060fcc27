"""Claude Code's own memory and history on disk, read for `compozy import claude-code` (no Django, no writes).

The layout, as Claude Code documents it ("Manage Claude's memory": auto memory) and writes it:

- `<claude dir>/projects/<project>/memory/MEMORY.md`: the index, lines such as `- [Title](file.md) — hook`
- `<claude dir>/projects/<project>/memory/<topic>.md`: one memory each, frontmatter `name`, `description` and
  `type` (user, feedback, project or reference, the same closed set as ours), then the Markdown body
- `<claude dir>/projects/<project>/<session id>.jsonl`: each past session's transcript (see
  `memory.sessions.claude_code`); its lines carry the session's `cwd` and each line's `timestamp`

`<project>` is the project's path with every character outside `[A-Za-z0-9]` replaced by `-` (the git root for the
memory folder). That is not reversible (a `-` in a directory name reads as a separator), so a project's checkout is
found, never guessed: a `cwd` its transcripts name whose path (or an ancestor's) sanitizes to the folder's name, or
else a walk down from `/` through directories whose sanitized path is a prefix of the name. A project whose
checkout no longer exists has no path: the import reports it.

Safety: nothing under the Claude folder is written. Every file is opened with O_NOFOLLOW and O_NONBLOCK and must be
a regular file; a symlink (file or project folder) is reported and never followed, so nothing outside the folder is
ever read. Reads are bounded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from memory.domain.enums import MemoryType

INDEX_NAME = "MEMORY.md"
# Larger than any memory the controller would take ([memory.file] max_bytes is 25,600 by default): a bigger file is
# reported as too large without being read whole.
MAX_MEMORY_FILE_BYTES = 1 << 20
# A transcript is read whole to be imported; one larger than this is reported, not read.
MAX_TRANSCRIPT_BYTES = 256 << 20
# Lines read from the head of each transcript to learn its project's `cwd`.
CWD_PROBE_LINES = 50
# The walk from `/` that finds a checkout by its sanitized name looks at no more directories than this.
WALK_BUDGET = 20_000
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_INDEX_LINK = re.compile(r"\]\(([^)\s]+)\)")
FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def default_claude_dir() -> Path:
    """Where Claude Code keeps its state: `$CLAUDE_CONFIG_DIR` when set (Claude Code honours it), else ~/.claude."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def sanitize(path: str) -> str:
    """A path as Claude Code names its project folder."""
    return _NOT_ALNUM.sub("-", path)


@dataclass(frozen=True)
class Problem:
    """A file or folder that is not imported, and why (a stable reason word)."""

    source: str  # the path relative to the Claude folder
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class AutoMemory:
    """One auto-memory topic file, parsed."""

    source: str  # relative to the Claude folder, the file's identity across imports
    type: MemoryType
    name: str
    description: str
    body: str
    modified_at: datetime
    sha256: str


@dataclass(frozen=True)
class Transcript:
    source: str
    path: Path
    session_id: str
    size: int
    modified_at: datetime


@dataclass
class Project:
    folder: Path
    source: str  # `projects/<name>`
    checkout: Path | None  # None: its checkout is not on this machine
    memories: list[AutoMemory] = field(default_factory=list)
    transcripts: list[Transcript] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result] | str:
    """The bytes of a regular file, never through a symlink and never more than `limit`; else the reason word."""
    try:
        fd = os.open(path, FLAGS)
    except OSError as exc:
        return "symlink" if exc.errno == 40 else "unreadable"  # ELOOP: O_NOFOLLOW met a link
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not_a_file"
        if info.st_size > limit:
            return "too_large"
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return "too_large" if len(data) > limit else (data, info)
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def _entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            yield from sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return


def _moment(info: os.stat_result) -> datetime:
    return datetime.fromtimestamp(info.st_mtime, UTC).replace(microsecond=0)


def parse_memory(source: str, data: bytes, info: os.stat_result) -> AutoMemory | Problem:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Problem(source, "encoding", "not UTF-8")
    if not text.startswith("---"):
        return Problem(source, "frontmatter", "no frontmatter block")
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        return Problem(source, "frontmatter", "the frontmatter block is not closed")
    try:
        meta = yaml.safe_load(parts[0][3:])
    except yaml.YAMLError:
        return Problem(source, "frontmatter", "the frontmatter is not valid YAML")
    if not isinstance(meta, dict):
        return Problem(source, "frontmatter", "the frontmatter is not a mapping")
    try:
        memory_type = MemoryType(str(meta.get("type", "")).strip())
    except ValueError:
        return Problem(source, "frontmatter", f"type {meta.get('type')!r} is not user, feedback, project or reference")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        return Problem(source, "frontmatter", "no name")
    body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    if not isinstance(description, str) or not description.strip():
        # Older auto-memory files have no description: the body's first line says what the file holds.
        first = next((line.strip("#-* \t") for line in body.splitlines() if line.strip()), "")
        description = first[:200] or name
    return AutoMemory(source, memory_type, " ".join(name.split()), " ".join(description.split()), body,
                      _moment(info), hashlib.sha256(data).hexdigest())


def read_memories(claude_dir: Path, memory_dir: Path) -> tuple[list[AutoMemory], list[Problem]]:
    memories: list[AutoMemory] = []
    problems: list[Problem] = []
    present: set[str] = set()
    for entry in _entries(memory_dir):
        if not entry.name.endswith(".md") or entry.name == INDEX_NAME or entry.name.startswith("."):
            continue
        source = str(Path(entry.path).relative_to(claude_dir))
        present.add(entry.name)
        read = read_regular(Path(entry.path), MAX_MEMORY_FILE_BYTES)
        if isinstance(read, str):
            problems.append(Problem(source, read))
            continue
        parsed = parse_memory(source, *read)
        (memories if isinstance(parsed, AutoMemory) else problems).append(parsed)  # type: ignore[arg-type]
    index = read_regular(memory_dir / INDEX_NAME, MAX_MEMORY_FILE_BYTES)
    if not isinstance(index, str):
        for target in _INDEX_LINK.findall(index[0].decode("utf-8", "replace")):
            if "/" not in target and target.endswith(".md") and target not in present:
                problems.append(Problem(str((memory_dir / INDEX_NAME).relative_to(claude_dir)),
                                        "index_points_to_missing_file", target))
    return memories, problems


def read_transcripts(claude_dir: Path, folder: Path) -> tuple[list[Transcript], list[Problem]]:
    transcripts: list[Transcript] = []
    problems: list[Problem] = []
    for entry in _entries(folder):
        if not entry.name.endswith(".jsonl"):
            continue
        source = str(Path(entry.path).relative_to(claude_dir))
        try:
            info = os.stat(entry.path, follow_symlinks=False)
        except OSError:
            problems.append(Problem(source, "unreadable"))
            continue
        if stat.S_ISLNK(info.st_mode):
            problems.append(Problem(source, "symlink"))
        elif not stat.S_ISREG(info.st_mode):
            problems.append(Problem(source, "not_a_file"))
        elif info.st_size > MAX_TRANSCRIPT_BYTES:
            problems.append(Problem(source, "too_large"))
        else:
            transcripts.append(Transcript(source, Path(entry.path), entry.name.removesuffix(".jsonl"),
                                          info.st_size, _moment(info)))
    return transcripts, problems


def transcript_lines(transcript: Transcript) -> list[dict[str, Any]] | str:
    """The transcript's JSON objects, in order, or the reason it could not be read. A line that is not a JSON
    object is left out (a line cut by a crash must not stop the rest)."""
    read = read_regular(transcript.path, MAX_TRANSCRIPT_BYTES)
    if isinstance(read, str):
        return read
    lines = []
    for raw in read[0].decode("utf-8", "replace").splitlines():
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines


def _probe_cwds(transcripts: list[Transcript]) -> list[str]:
    seen: dict[str, None] = {}
    for transcript in transcripts:
        read = read_regular(transcript.path, MAX_TRANSCRIPT_BYTES)
        if isinstance(read, str):
            continue
        for raw in read[0].decode("utf-8", "replace").splitlines()[:CWD_PROBE_LINES]:
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            cwd = value.get("cwd") if isinstance(value, dict) else None
            if isinstance(cwd, str) and cwd.startswith("/"):
                seen.setdefault(cwd, None)
    return list(seen)


def _walk(name: str) -> Path | None:
    """The directory whose absolute path sanitizes to `name`, found from `/` down (links are not followed)."""
    budget = [WALK_BUDGET]

    def down(directory: Path, done: str) -> Path | None:
        if done == name:
            return directory
        for entry in _entries(directory):
            budget[0] -= 1
            if budget[0] < 0:
                return None
            if not entry.is_dir(follow_symlinks=False):
                continue
            step = done + sanitize("/" + entry.name)
            if name == step or name.startswith(step + "-"):
                found = down(Path(entry.path), step)
                if found is not None:
                    return found
        return None

    return down(Path("/"), "") if name.startswith("-") else None


def find_checkout(folder_name: str, cwds: list[str]) -> Path | None:
    for cwd in cwds:
        for candidate in (Path(cwd), *Path(cwd).parents):
            if sanitize(str(candidate)) == folder_name and candidate.is_dir():
                return candidate
    return _walk(folder_name)


def read_projects(claude_dir: Path) -> tuple[list[Project], list[Problem]]:
    """Every project folder of the Claude folder, with its memories, transcripts and problems."""
    projects: list[Project] = []
    problems: list[Problem] = []
    root = claude_dir / "projects"
    for entry in _entries(root):
        source = f"projects/{entry.name}"
        if entry.is_symlink():
            problems.append(Problem(source, "symlink"))
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        folder = Path(entry.path)
        transcripts, transcript_problems = read_transcripts(claude_dir, folder)
        project = Project(folder, source, find_checkout(entry.name, _probe_cwds(transcripts)))
        project.transcripts = transcripts
        project.problems.extend(transcript_problems)
        memory_dir = folder / "memory"
        if memory_dir.is_symlink():
            project.problems.append(Problem(f"{source}/memory", "symlink"))
        elif memory_dir.is_dir():
            project.memories, memory_problems = read_memories(claude_dir, memory_dir)
            project.problems.extend(memory_problems)
        projects.append(project)
    return projects, problems
