"""Issue 24 item 11: a copied checkout (its .compozy/workspace.toml carries the original's ULID) never acts as the
original. It is reported (memory.workspace.copied) until `compozy workspace adopt` or `fork`, through the CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import Cli
from tests.helpers import workspace_root


def write(cli: Cli, cwd: Path, name: str, content: str):
    return cli("memory", "write", "--scope", "workspace", "--type", "project", "--name", name,
               "--description", f"About {name}", "--content", content, "-o", "json", cwd=cwd)


def ops(cli: Cli, cwd: Path) -> list[tuple[str, str]]:
    listed = cli("memory", "decisions", "list", "-o", "json", cwd=cwd)
    assert listed.code == 0, listed.stderr
    return sorted((d["op"], d["target_filename"]) for d in listed.json["decisions"])


def test_a_copied_checkout_is_reported_and_its_list_and_reindex_record_no_delete_for_the_original(
        cli: Cli, workspace_dir: Path, memory_root: Path, tmp_path: Path) -> None:
    assert write(cli, workspace_dir, "Port fact", "Staging listens on port 6543.").code == 0
    assert write(cli, workspace_dir, "Deploy day", "Deploys go out on Fridays.").code == 0
    copy = tmp_path / "copy"
    shutil.copytree(workspace_dir, copy)
    # The case too: only workspace.toml copied into another directory, no memory files beside it.
    bare = tmp_path / "bare"
    (bare / ".compozy").mkdir(parents=True)
    shutil.copy(workspace_dir / ".compozy" / "workspace.toml", bare / ".compozy" / "workspace.toml")
    for directory in (copy, bare):
        for verb in (("memory", "list"), ("memory", "reindex"), ("memory", "health")):
            answer = cli(*verb, "-o", "json", cwd=directory)
            assert answer.code == 4, (verb, answer.stdout, answer.stderr)
            assert answer.json["code"] == "memory.workspace.copied"
            assert answer.json["details"]["registered_path"] == str(workspace_dir.resolve())
            assert "Traceback" not in answer.stderr
        refused = write(cli, directory, "Copy fact", "Written in the copy.")
        assert refused.code == 4 and refused.json["code"] == "memory.workspace.copied"
        listed = cli("workspace", "list", "-o", "json", cwd=directory).json
        assert listed["here"]["status"] == "copied" and listed["here"]["code"] == "memory.workspace.copied"
        assert [(w["path"], w["status"]) for w in listed["workspaces"]] == [(str(workspace_dir.resolve()), "ok")]
    # The original is untouched: no delete decision, its files and registration where they were.
    assert ops(cli, workspace_dir) == [("add", "project_deploy_day.md"), ("add", "project_port_fact.md")]
    files = sorted(p.name for p in memory_root.glob("project_*.md"))
    assert files == ["project_deploy_day.md", "project_port_fact.md"]
    assert cli("workspace", "show", "-o", "json", cwd=workspace_dir).json["status"] == "registered"
    assert not (workspace_root(copy) / "project_copy_fact.md").exists()


def test_adopt_moves_the_registration_to_the_copy_and_the_old_directory_becomes_the_copy(
        cli: Cli, workspace_dir: Path, memory_root: Path, tmp_path: Path) -> None:
    assert write(cli, workspace_dir, "Port fact", "Staging listens on port 6543.").code == 0
    moved = tmp_path / "moved"
    shutil.copytree(workspace_dir, moved)
    adopted = cli("workspace", "adopt", "-o", "json", cwd=moved)
    assert adopted.code == 0, adopted.stderr
    assert adopted.json["path"] == str(moved.resolve())
    assert adopted.json["previous_path"] == str(workspace_dir.resolve())
    listed = cli("memory", "list", "-o", "json", cwd=moved)
    assert listed.code == 0, listed.stderr
    assert [m["filename"] for m in listed.json["memories"]] == ["project_port_fact.md"]
    assert write(cli, moved, "Moved fact", "Written after the adopt.").code == 0
    assert (workspace_root(moved) / "project_moved_fact.md").is_file()
    assert not (memory_root / "project_moved_fact.md").exists()
    stale = cli("memory", "list", "-o", "json", cwd=workspace_dir)
    assert stale.code == 4 and stale.json["code"] == "memory.workspace.copied"
    assert ops(cli, moved) == [("add", "project_moved_fact.md"), ("add", "project_port_fact.md")]


def test_fork_gives_the_copy_its_own_identity_with_its_memories_readded_and_the_original_keeps_its_own(
        cli: Cli, workspace_dir: Path, tmp_path: Path) -> None:
    assert write(cli, workspace_dir, "Port fact", "Staging listens on port 6543.").code == 0
    original = cli("workspace", "show", "-o", "json", cwd=workspace_dir).json["id"]
    copy = tmp_path / "copy"
    shutil.copytree(workspace_dir, copy)
    forked = cli("workspace", "fork", "-o", "json", cwd=copy)
    assert forked.code == 0, forked.stderr
    assert forked.json["forked_from"] == original and forked.json["id"] != original
    assert len(forked.json["readded"]) == 1
    assert cli("workspace", "show", "-o", "json", cwd=copy).json == {
        "id": forked.json["id"], "path": str(copy.resolve()), "registered_path": str(copy.resolve()),
        "status": "registered", "code": None}
    decisions = cli("memory", "decisions", "list", "-o", "json", cwd=copy).json["decisions"]
    assert [(d["id"], d["op"], d["workspace_id"]) for d in decisions if d["scope"] == "workspace"] == [
        (forked.json["readded"][0], "add", forked.json["id"])]
    assert write(cli, copy, "Copy fact", "Only the copy knows this.").code == 0
    assert ops(cli, workspace_dir) == [("add", "project_port_fact.md")]
    assert cli("memory", "list", "-o", "json", cwd=workspace_dir).code == 0
    again = cli("workspace", "fork", "-o", "json", cwd=workspace_dir)
    assert again.code == 4 and again.json["details"]["reason"] == "not_a_copy"
