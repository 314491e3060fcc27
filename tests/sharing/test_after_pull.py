"""What arrives through git while no watcher runs becomes decisions (origin `file`) before the next command reads
the catalog, noticed by the root directory's mtime alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memory.controller import freshness
from tests.conftest import Cli

pytestmark = pytest.mark.django_db


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


def test_a_pulled_memory_is_a_file_decision_and_recalled_by_the_next_command(cli, tmp_path, workspace_dir):
    (workspace_dir / ".git").rmdir()
    git(workspace_dir, "init", "-q", "-b", "main")
    assert cli("memory", "write", "--type", "project", "--name", "Release train", "--description", "when we ship",
               "--content", "Releases leave every Tuesday.").code == 0
    git(workspace_dir, "add", ".compozy")
    git(workspace_dir, "commit", "-qm", "memory")
    teammate = tmp_path / "teammate"
    git(tmp_path, "clone", "-q", str(workspace_dir), str(teammate))
    memory = teammate / ".compozy" / "memory"
    (memory / "project_flaky_tests.md").write_text(
        (memory / "project_release_train.md").read_text().replace("Release train", "Flaky tests")
        .replace("when we ship", "which tests flake").replace("Releases leave every Tuesday.",
                                                              "The zzquux integration suite flakes on Mondays."))
    git(teammate, "add", ".compozy")
    git(teammate, "commit", "-qm", "teammate's memory")
    git(workspace_dir, "pull", "-q", str(teammate), "main")
    search = cli("memory", "search", "zzquux integration suite", "-o", "json")
    assert "project_flaky_tests.md" in search.stdout
    decisions = cli("memory", "decisions", "list", "-o", "json").json["decisions"]
    pulled = [d for d in decisions if d["target_filename"] == "project_flaky_tests.md"]
    assert [(d["op"], d["origin"]) for d in pulled] == [("add", "file")]
    assert "project_flaky_tests.md" in (workspace_dir / ".compozy" / "memory" / "MEMORY.md").read_text()


def test_an_unchanged_root_is_not_listed_again(home, workspace_dir, monkeypatch):
    from tests import helpers as h
    h.write(workspace_dir, name="Quiet", content="Nothing changes here.")
    h.listing(workspace_dir)  # records the root's mtime once the write moved it
    listed: list[str] = []
    monkeypatch.setattr(freshness, "changed_files", lambda key, root: listed.append(key) or [])
    h.listing(workspace_dir)
    assert listed == []
    (workspace_dir / ".compozy" / "memory" / "project_new.md").write_text("---\nname: x\n---\nbody\n")
    h.listing(workspace_dir)
    assert len(listed) == 1


def test_the_controllers_own_writes_never_make_the_next_call_list_the_root(home, workspace_dir, monkeypatch):
    """A write moves the root's mtime (it renames its file into place); the controller moves the stamp with it,
    so a call after a write costs one stat, not a listing of every memory (a write in a root of 1,000 memories
    spent half its time listing them)."""
    from tests import helpers as h
    h.write(workspace_dir, name="First", content="The first fact.")
    h.listing(workspace_dir)  # in step from here on
    listed: list[str] = []
    real = freshness.changed_files
    monkeypatch.setattr(freshness, "changed_files", lambda key, root: listed.append(key) or real(key, root))
    h.write(workspace_dir, name="Second", content="The second fact.")
    h.write(workspace_dir, name="Third", content="The third fact.")
    h.listing(workspace_dir)
    assert listed == []


def test_a_root_changed_from_outside_keeps_its_stamp_through_a_controller_write(home, workspace_dir):
    """The stamp follows a write only from the mtime it held: when something arrived from outside since (between
    the call's check and its write), the old stamp stays, so the next call still lists and reconciles the root."""
    from memory.controller import stamps
    from tests import helpers as h
    h.write(workspace_dir, name="First", content="The first fact.")
    h.listing(workspace_dir)
    key = h.workspace_root_key(workspace_dir) if hasattr(h, "workspace_root_key") else None
    root_key = key or next(k for k in _root_keys() if k.startswith("workspace:"))
    in_step = stamps.recorded(root_key)
    assert in_step is not None
    stamps.advance(root_key, in_step - 1, in_step + 5)  # the root had moved before this write: no advance
    assert stamps.recorded(root_key) == in_step
    stamps.advance(root_key, in_step, in_step + 5)
    assert stamps.recorded(root_key) == in_step + 5


def _root_keys() -> list[str]:
    from memory.models import CatalogEntry
    return sorted(set(CatalogEntry.objects.values_list("root_key", flat=True)))


def test_two_clones_editing_one_memory_end_with_a_reported_conflict_resolved_with_nothing_lost(cli, tmp_path,
                                                                                                workspace_dir):
    (workspace_dir / ".git").rmdir()
    git(workspace_dir, "init", "-q", "-b", "main")
    assert cli("memory", "write", "--type", "project", "--name", "Staging port", "--description", "where staging "
               "listens", "--content", "Staging listens on 5433.").code == 0
    git(workspace_dir, "add", ".compozy")
    git(workspace_dir, "commit", "-qm", "memory")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(workspace_dir), str(other))
    (tmp_path / "home-b").mkdir()
    machine_b = Cli(home=tmp_path / "home-b", cwd=other)  # the teammate's machine: its own home
    # Each machine's own sessions rewrite its checkpoint: ignored, it never meets the teammate's.
    for machine, checkout, port in ((cli, workspace_dir, "6543"), (machine_b, other, "7000")):
        (checkout / ".compozy" / "memory" / "project_checkpoint_summary.md").write_text(f"session on {port}\n")
        assert machine("memory", "edit", "project_staging_port.md", "--content", f"Staging listens on {port}.",
                       ).code == 0
        git(checkout, "add", ".compozy")
        git(checkout, "commit", "-qm", f"port {port}")
    pulled = subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "pull", "-q", "--no-rebase",
                             str(other), "main"], cwd=workspace_dir, capture_output=True, text=True)
    assert pulled.returncode != 0
    conflicted = subprocess.run(["git", "diff", "--name-only", "--diff-filter=U"], cwd=workspace_dir,
                                capture_output=True, text=True).stdout.split()
    assert conflicted == [".compozy/memory/project_staging_port.md"]  # never the checkpoint nor MEMORY.md
    search = cli("memory", "search", "staging listens", "-o", "json").stdout
    assert "6543" in search and "7000" not in search and "<<<<<<<" not in search
    health = cli("memory", "health", "-o", "json").json
    assert [(i["filename"], i["reason"]) for i in health["invalid_files"] if i["reason"] == "conflict_markers"] == [
        ("project_staging_port.md", "conflict_markers")]
    resolved = cli("memory", "resolve", "project_staging_port.md", "--keep", "both", "-o", "json")
    assert resolved.code == 0, resolved.stdout + resolved.stderr
    memory = workspace_dir / ".compozy" / "memory"
    assert "6543" in (memory / "project_staging_port.md").read_text()
    assert "7000" in (memory / "project_staging_port_theirs.md").read_text()
    assert "conflict_markers" not in cli("memory", "health", "-o", "json").stdout
