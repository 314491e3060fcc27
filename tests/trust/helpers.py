"""Helpers the trust tests share: a real small filesystem (a tmpfs the test mounts, skipped with the reason where
the machine cannot mount one) and a bare checkout."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount_tmpfs(target: Path, size: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): no real full filesystem")


@contextlib.contextmanager
def tmpfs(target: Path, size: str = "1m") -> Iterator[Path]:
    _mount_tmpfs(target, size)
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def new_checkout(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / ".git").mkdir(exist_ok=True)
    return path
