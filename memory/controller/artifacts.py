"""Machine-written artifacts under a root's `_system/dreaming/` (a run's report and its failure records) and
`_system/checkpoint/` (the records of failed workspace-checkpoint generations).

They are not memory documents (no frontmatter, never indexed, never listed, never recalled, never in a snapshot)
and no decision records them; they still land through the store's atomic-write helper, like every other write
under a memory root.
"""

from __future__ import annotations

from pathlib import Path

from memory.domain.errors import ValidationError
from memory.domain.names import SYSTEM_DIR
from memory.store import files

DREAMING_DIR = f"{SYSTEM_DIR}/dreaming"
FAILURES_DIR = f"{DREAMING_DIR}/failures"
CHECKPOINT_DIR = f"{SYSTEM_DIR}/checkpoint"
ARTIFACT_DIRS = (DREAMING_DIR, CHECKPOINT_DIR)
_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")


def artifact_path(root: Path, relative: str) -> Path:
    """The path of an artifact, refusing anything outside the artifact directories or with an unsafe name."""
    parts = relative.split("/")
    inside = any(relative.startswith(directory + "/") for directory in ARTIFACT_DIRS) and all(parts)
    if not inside or ".." in relative or not all(set(part) <= _ALLOWED for part in parts[2:]):
        raise ValidationError("Machine artifacts live under _system/dreaming/ or _system/checkpoint/ with plain names.",
                              details={"filename": relative, "reason": "artifact_path"})
    return files.safe_path(root, relative)


def write_artifact(root: Path, relative: str, text: str) -> Path:
    path = artifact_path(root, relative)
    files.atomic_write(path, text)
    return path


def read_artifact(root: Path, relative: str) -> str | None:
    try:
        return artifact_path(root, relative).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
