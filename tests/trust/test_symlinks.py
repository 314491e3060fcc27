"""Hole 1: nothing under a memory root is opened through a symlink.

A repository can ship `.compozy/memory/MEMORY.md` (or a memory file, or the memory directory itself) as a symlink
to any file of the user who runs an agent in it. Following such a link turned every write into an append to that
file. Every open under a root now refuses links (O_NOFOLLOW), health reports them, and MEMORY.md is re-rendered
atomically over a link instead of appended through it.
"""

from __future__ import annotations

import os

import pytest

from memory.domain.errors import ValidationError
from memory.models import CatalogEntry
from tests import helpers as h
from tests.helpers import workspace_root
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db

OUTSIDE_TEXT = "# a file of the user's, outside every memory root\n"


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside.txt"
    path.write_text(OUTSIDE_TEXT)
    return path


def index_of(workspace):
    return workspace_root(workspace) / "MEMORY.md"


def test_a_write_never_appends_through_a_symlinked_memory_index(ws_with_a_memory, outside):
    index = index_of(ws_with_a_memory)
    index.unlink()
    os.symlink(outside, index)
    h.write(ws_with_a_memory, name="Cache Policy", content="Edge caches static assets for one hour.")
    h.write(ws_with_a_memory, name="Lint Rules", content="Ruff runs with line length one hundred ten.")
    assert outside.read_text() == OUTSIDE_TEXT
    # The link was replaced by a regular index listing exactly the memories of the root.
    assert not index.is_symlink()
    listed = [line for line in index.read_text().splitlines() if line.startswith("- [")]
    assert sorted(line.split("](")[1].split(")")[0] for line in listed) == [
        "project_cache_policy.md", "project_lint_rules.md", "project_zebra_crossing.md"]


def test_an_edit_and_a_delete_never_write_through_a_symlinked_memory_index(ws_with_a_memory, outside):
    h.write(ws_with_a_memory, name="Cache Policy", content="Edge caches static assets for one hour.")
    index = index_of(ws_with_a_memory)
    index.unlink()
    os.symlink(outside, index)
    h.edit(ws_with_a_memory, filename="project_cache_policy.md", content="Edge caches static assets for two hours.")
    index.unlink()
    os.symlink(outside, index)
    h.delete(ws_with_a_memory, filename="project_cache_policy.md")
    assert outside.read_text() == OUTSIDE_TEXT
    assert not index.is_symlink() and "project_cache_policy.md" not in index.read_text()


def test_health_reports_a_symlinked_memory_index_as_a_symlink_escape(ws_with_a_memory, outside):
    index = index_of(ws_with_a_memory)
    index.unlink()
    os.symlink(outside, index)
    health = h.health(ws_with_a_memory)
    assert health["status"] == "degraded"
    assert [(item["filename"], item["reason"]) for item in health["invalid_files"]] == [("MEMORY.md", "symlink_escape")]
    h.reindex(ws_with_a_memory)  # reindex re-renders the index whole, replacing the link
    assert outside.read_text() == OUTSIDE_TEXT
    assert h.health(ws_with_a_memory)["status"] == "ok"


def test_a_snapshot_never_reads_a_symlinked_index_or_checkpoint(ws_with_a_memory, tmp_path, memory_root):
    r.put(tmp_path, "project_checkpoint_summary.md", name="Checkpoint summary",
          description="Where earlier work stands", body="A private note from another project.")
    root = memory_root
    os.symlink(tmp_path / "project_checkpoint_summary.md", root / "project_checkpoint_summary.md")
    index = index_of(ws_with_a_memory)
    index.unlink()
    index.write_text("# Memory Index\n")  # lists nothing: a followed link would hide the zebra entry
    listing_file = tmp_path / "listing.md"
    listing_file.write_text("# Memory Index\n")
    index.unlink()
    os.symlink(listing_file, index)
    text = r.snapshot(ws_with_a_memory)["text"]
    assert "A private note from another project" not in text
    assert "project_zebra_crossing.md" in text  # the link was not read: the index is built from the catalog


def test_a_memory_file_symlinked_to_another_file_in_the_same_root_is_refused(ws_with_a_memory, memory_root):
    root = memory_root
    os.symlink(root / "project_zebra_crossing.md", root / "project_alias.md")
    with pytest.raises(ValidationError) as error:
        h.show(ws_with_a_memory, filename="project_alias.md")
    assert error.value.details["reason"] == "symlink_escape"
    health = h.health(ws_with_a_memory)
    assert {"root_key": health["invalid_files"][0]["root_key"], "filename": "project_alias.md",
            "reason": "symlink_escape"} in health["invalid_files"]
    assert not CatalogEntry.objects.filter(filename="project_alias.md").exists()


def test_a_symlinked_memory_directory_is_refused_and_nothing_is_written_through_it(
        home, workspace_dir, tmp_path, memory_root):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace_dir / ".compozy").mkdir()
    os.symlink(elsewhere, memory_root)
    with pytest.raises(ValidationError) as error:
        h.write(workspace_dir, name="Cache Policy", content="Edge caches static assets for one hour.")
    assert error.value.details["reason"] == "symlink_escape"
    assert list(elsewhere.iterdir()) == []
    health = h.health(workspace_dir)
    assert health["status"] == "degraded"
    assert [item["reason"] for item in health["invalid_files"]] == ["symlink_escape"]


def test_a_symlinked_compozy_directory_is_refused(home, workspace_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "memory").mkdir(parents=True)
    h.write(workspace_dir, name="Seed", content="Creates the workspace identity first.")
    compozy_dir = workspace_dir / ".compozy"
    os.rename(compozy_dir, tmp_path / "moved")
    (tmp_path / "moved" / "workspace.toml").rename(elsewhere / "workspace.toml")
    os.symlink(elsewhere, compozy_dir)
    with pytest.raises(ValidationError) as error:
        h.write(workspace_dir, name="Cache Policy", content="Edge caches static assets for one hour.")
    assert error.value.details["reason"] == "symlink_escape"
    assert sorted(p.name for p in (elsewhere / "memory").iterdir()) == []
