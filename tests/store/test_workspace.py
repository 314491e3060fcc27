"""Workspace identity: a ULID in .compozy/workspace.toml, resolved flag ▸ env ▸ nearest ancestor."""

from __future__ import annotations

import shutil
import tomllib

import pytest

from memory.domain.errors import ValidationError, WorkspaceRequired
from memory.models import Event, Workspace
from memory.store.workspace import is_ulid
from tests import helpers as h
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db


def ws_id(directory):
    return tomllib.loads((directory / ".compozy" / "workspace.toml").read_text())["workspace_id"]


def test_workspace_toml_is_created_on_first_workspace_write_with_a_ulid(home, workspace_dir):
    h.write(workspace_dir, name="First", content="The first fact.")
    data = tomllib.loads((workspace_dir / ".compozy" / "workspace.toml").read_text())
    assert is_ulid(data["workspace_id"])
    assert data["realpath_at_creation"] == str(workspace_dir.resolve())
    assert data["created_at"].endswith("Z")


def test_the_workspace_is_created_at_the_enclosing_git_checkout(home, workspace_dir):
    nested = workspace_dir / "src" / "pkg"
    nested.mkdir(parents=True)
    h.write(nested, name="Nested", content="Written from a subdirectory.")
    assert (workspace_dir / ".compozy" / "workspace.toml").is_file()
    assert not (nested / ".compozy").exists()


def test_the_nearest_ancestor_workspace_is_used_from_subdirectories(home, workspace_dir):
    h.write(workspace_dir, name="Top", content="Written at the top.")
    nested = workspace_dir / "a" / "b"
    nested.mkdir(parents=True)
    names = [m["filename"] for m in h.listing(nested)["memories"]]
    assert names == ["project_top.md"]


def test_flag_beats_environment_beats_ancestor(home, workspace_dir, tmp_path, monkeypatch):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    h.write(workspace_dir, name="Here", content="In the current workspace.")
    h.write(other, name="There", content="In the other workspace.")
    assert [m["filename"] for m in h.listing(workspace_dir)["memories"]] == ["project_here.md"]
    assert [m["filename"] for m in h.listing(workspace_dir, workspace=str(other))["memories"]] == ["project_there.md"]
    assert [m["filename"] for m in h.listing(workspace_dir, workspace=ws_id(other))["memories"]] == [
        "project_there.md"]


def test_the_environment_variable_selects_the_workspace_on_the_cli(cli, tmp_path):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    assert cli("memory", "write", "--type", "project", "--name", "Env", "--description", "d",
               "--content", "Selected by environment.", COMPOZY_WORKSPACE=str(other)).code == 0
    assert (workspace_root(other) / "project_env.md").is_file()
    # The checkout the CLI runs in holds no workspace: naming it is an error, never an empty (global-only) list.
    listed = cli("memory", "list", "-o", "json", "--workspace", str(cli.cwd)).json
    assert listed["code"] == "memory.scope.workspace_required" and listed["details"]["reason"] == "no_workspace"
    assert not (cli.cwd / ".compozy").exists()


def test_a_moved_workspace_keeps_its_memory_and_records_the_relocation(home, workspace_dir, tmp_path):
    h.write(workspace_dir, name="Portable", content="This survives a move.")
    identity = ws_id(workspace_dir)
    moved = tmp_path / "moved"
    shutil.move(str(workspace_dir), str(moved))
    names = [m["filename"] for m in h.listing(moved)["memories"]]
    assert names == ["project_portable.md"]
    assert Workspace.objects.get(id=identity).path == str(moved.resolve())
    event = Event.objects.get(op="memory.workspace.relocated")
    assert event.workspace_id == identity
    assert event.metadata["to"] == str(moved.resolve())
    h.listing(moved)
    assert Event.objects.filter(op="memory.workspace.relocated").count() == 1


@pytest.mark.parametrize(
    "content",
    [
        "workspace_id = 'not-a-ulid'\ncreated_at = '2026-01-01T00:00:00Z'\nrealpath_at_creation = '/x'\n",
        "this is not toml",
        "workspace_id = '01HXJ9YR4Q0000000000000000'\n",
        "workspace_id = '01HXJ9YR4Q0000000000000000'\ncreated_at = 'yesterday'\nrealpath_at_creation = '/x'\n",
    ],
)
def test_an_invalid_workspace_toml_is_an_error_never_a_fresh_identity(home, workspace_dir, content, memory_root):
    (workspace_dir / ".compozy").mkdir()
    toml = workspace_dir / ".compozy" / "workspace.toml"
    toml.write_text(content)
    with pytest.raises(ValidationError) as error:
        h.write(workspace_dir, name="Nope", content="Should not be written.")
    assert str(toml) in error.value.message
    assert toml.read_text() == content
    assert not (memory_root).exists()


def test_a_workspace_call_without_a_workspace_fails_when_auto_create_is_off(home, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOZY_MEMORY__WORKSPACE__AUTO_CREATE", "false")
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(WorkspaceRequired):
        h.write(bare, name="Nowhere", content="No workspace to hold this.")
    assert not (bare / ".compozy").exists()


def test_home_itself_never_becomes_a_workspace(home, monkeypatch):
    # COMPOZY_HOME is <dir>/.compozy-like: a workspace at its parent would share the global memory root.
    nested_home = home / "user"
    (nested_home / ".compozy").mkdir(parents=True)
    monkeypatch.setenv("COMPOZY_HOME", str(nested_home / ".compozy"))
    with pytest.raises(WorkspaceRequired):
        h.write(nested_home, name="Collide", content="Would land in the global root.")


def test_two_workspaces_never_see_each_others_workspace_or_agent_memory(home, workspace_dir, tmp_path):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    for directory, label in ((workspace_dir, "alpha"), (other, "beta")):
        h.write(directory, name="Shared Slug", content=f"Workspace fact {label}.")
        h.write(directory, name="Agent Note", scope="agent", agent_name="coder", type="feedback",
                content=f"Agent fact {label}.")
    for directory, label, foreign in ((workspace_dir, "alpha", "beta"), (other, "beta", "alpha")):
        listed = h.listing(directory, agent_name="coder")["memories"]
        assert len(listed) == 2
        for memory in listed:
            body = h.show(directory, filename=memory["filename"],
                          **({"scope": "agent", "agent_name": "coder"} if memory["scope"] == "agent" else {}))
            assert label in body["memory"]["content"] and foreign not in body["memory"]["content"]
        decisions = h.decision_list(directory)["decisions"]
        assert all(d["workspace_id"] in (None, ws_id(directory)) for d in decisions)
