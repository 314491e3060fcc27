"""A workspace's `.compozy/` shared through the project's git: curated memory and identity in, machine state out."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memory.store.sharing import IGNORED
from tests import helpers as h

pytestmark = pytest.mark.django_db


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_git_add_of_compozy_after_the_first_write_stages_memory_and_identity_and_nothing_local(
        home, workspace_dir, memory_root):
    (workspace_dir / ".git").rmdir()
    git(workspace_dir, "init", "-q")
    h.write(workspace_dir, name="Deploys", content="Deploys go through the staging cluster first.")
    system = memory_root / "_system" / "dreaming"
    (system / "20260101-run.md").write_text("a dream report\n")
    (memory_root / "project_checkpoint_summary.md").write_text("one person's\n")
    git(workspace_dir, "add", ".compozy")
    staged = sorted(git(workspace_dir, "diff", "--cached", "--name-only").split())
    assert staged == [".compozy/.gitignore", ".compozy/memory/project_deploys.md", ".compozy/workspace.toml"]


def test_an_older_workspace_gets_the_missing_lines_on_its_next_write_and_keeps_its_own(home, workspace_dir):
    h.write(workspace_dir, name="First", content="The first fact.")
    ignore = workspace_dir / ".compozy" / ".gitignore"
    ignore.write_text("# ours\nnotes/\n_system/")  # a person's edit: one of Compozy's lines kept, no final newline
    h.write(workspace_dir, name="Second", content="The second fact.")
    h.write(workspace_dir, name="Third", content="The third fact.")
    lines = ignore.read_text().splitlines()
    assert lines[:3] == ["# ours", "notes/", "_system/"]
    assert sorted(lines[3:]) == sorted(line for line in IGNORED if line != "_system/")


def test_a_read_never_writes_the_gitignore(home, workspace_dir):
    h.write(workspace_dir, name="First", content="The first fact.")
    ignore = workspace_dir / ".compozy" / ".gitignore"
    ignore.unlink()
    h.listing(workspace_dir)
    assert not ignore.exists()
