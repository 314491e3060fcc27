"""Hole 7: a workspace is created only at a git checkout, or where the operator names it with --create-workspace;
never in a system directory or a directory the caller does not own; and a read of a path with no workspace is
`memory.scope.workspace_required`, not an empty 200."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from django.test import Client

from memory.domain.errors import WorkspaceRequired
from memory.store.workspace import unsuitable_reason
from tests import helpers as h

pytestmark = pytest.mark.django_db

FACT = {"type": "project", "name": "Cache Policy", "description": "What the edge caches",
        "content": "Edge caches static assets for one hour."}


@pytest.fixture
def plain_dir(tmp_path) -> Path:
    """A directory of the caller's that is not a git checkout."""
    path = tmp_path / "notes"
    path.mkdir()
    return path


def over_socket() -> Client:
    return Client(raise_request_exception=False, **{"gunicorn.socket": socket.socket(socket.AF_UNIX)})


def post(client: Client, body: dict) -> tuple[int, dict]:
    response = client.post("/api/memory", json.dumps(body), content_type="application/json")
    return response.status_code, json.loads(response.content)


def test_a_write_over_the_socket_never_turns_an_arbitrary_directory_into_a_workspace(home, plain_dir):
    status, body = post(over_socket(), {**FACT, "workspace": str(plain_dir)})
    assert status == 400 and body["code"] == "memory.scope.workspace_required", body
    assert body["details"]["reason"] == "not_a_checkout"
    assert not (plain_dir / ".compozy").exists()


def test_a_write_from_a_directory_outside_any_checkout_creates_no_workspace(home, plain_dir):
    with pytest.raises(WorkspaceRequired) as error:
        h.write(plain_dir, **FACT)
    assert error.value.details["reason"] == "not_a_checkout"
    assert not (plain_dir / ".compozy").exists()


def test_the_operator_can_name_a_directory_explicitly_on_every_surface(home, plain_dir, tmp_path, cli):
    written = h.write(tmp_path, workspace=str(plain_dir), create_workspace=True, **FACT)
    assert written["applied"] and (plain_dir / ".compozy" / "workspace.toml").is_file()
    other = tmp_path / "other-notes"
    other.mkdir()
    status, body = post(over_socket(), {**FACT, "workspace": str(other), "create_workspace": True})
    assert status == 200 and (other / ".compozy" / "workspace.toml").is_file(), body
    third = tmp_path / "third-notes"
    third.mkdir()
    result = cli("memory", "write", "--workspace", str(third), "--create-workspace", "--type", "project",
                 "--name", "Cli Fact", "--description", "d", "--content", "Named by the operator.", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    assert (third / ".compozy" / "workspace.toml").is_file()


def test_a_workspace_in_a_checkout_is_still_created_at_the_checkout_root(home, workspace_dir):
    nested = workspace_dir / "src" / "pkg"
    nested.mkdir(parents=True)
    status, body = post(over_socket(), {**FACT, "workspace": str(nested)})
    assert status == 200, body
    assert (workspace_dir / ".compozy" / "workspace.toml").is_file()
    assert not (nested / ".compozy").exists()


@pytest.mark.parametrize("directory", ["/etc", "/etc/ssl", "/usr/lib", "/proc", "/", "/var", "/var/lib/dpkg",
                                       "/boot", "/sys/kernel", "/tmp"])
def test_system_directories_are_never_workspaces(directory):
    assert unsuitable_reason(Path(directory)) == "system_directory"


def test_a_system_directory_is_refused_even_when_named_with_create_workspace(home, tmp_path):
    before = os.path.exists("/etc/.compozy")
    with pytest.raises(WorkspaceRequired) as error:
        h.write(tmp_path, workspace="/etc", create_workspace=True, **FACT)
    assert error.value.details["reason"] == "system_directory"
    assert os.path.exists("/etc/.compozy") == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a directory to another user")
def test_a_checkout_owned_by_another_user_is_refused(home, tmp_path):
    foreign = tmp_path / "someone-elses"
    (foreign / ".git").mkdir(parents=True)
    os.chown(foreign, 12345, 12345)
    with pytest.raises(WorkspaceRequired) as error:
        h.write(tmp_path, workspace=str(foreign), **FACT)
    assert error.value.details["reason"] == "not_owner"
    assert not (foreign / ".compozy").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write everywhere")
def test_a_directory_the_caller_cannot_write_is_refused(home, plain_dir):
    plain_dir.chmod(0o555)
    try:
        with pytest.raises(WorkspaceRequired) as error:
            h.write(plain_dir, workspace=str(plain_dir), create_workspace=True, **FACT)
        assert error.value.details["reason"] == "not_writable"
    finally:
        plain_dir.chmod(0o755)


def test_a_read_of_a_path_without_a_workspace_is_workspace_required_not_an_empty_answer(home, workspace_dir):
    h.write(workspace_dir, type="user", name="Global Fact", description="d", content="Visible everywhere.")
    unknown = workspace_dir.parent / "unknown-checkout"
    (unknown / ".git").mkdir(parents=True)
    client = over_socket()
    for path in ("/api/memory", "/api/memory/health", "/api/memory/decisions"):
        response = client.get(path, {"workspace": str(unknown)})
        body = json.loads(response.content)
        assert response.status_code == 400 and body["code"] == "memory.scope.workspace_required", (path, body)
        assert body["details"]["reason"] == "no_workspace"
    assert not (unknown / ".compozy").exists()


@pytest.mark.django_db(transaction=True)  # MCP runs plain tools in a worker thread
def test_an_mcp_server_started_in_a_fresh_checkout_reads_global_memory_and_creates_the_workspace_on_write(
        home, workspace_dir, tmp_path):
    import asyncio

    from mcp import Client

    from memory.tools.server import Session, build_server

    h.write(tmp_path, type="user", scope="global", name="Global Fact", description="d", content="Seen everywhere.")
    server = build_server(Session(session_id="fresh", cwd=str(workspace_dir)))

    async def go():
        async with Client(server) as client:
            listed = await client.call_tool("compozy__memory_list", {})
            written = await client.call_tool("compozy__memory_propose", {"operation": "add", **FACT})
            return listed, written

    listed, written = asyncio.run(go())
    assert not listed.is_error, listed.content
    assert [m["filename"] for m in listed.structured_content["memories"]] == ["user_global_fact.md"]
    assert not written.is_error, written.content
    assert (workspace_dir / ".compozy" / "workspace.toml").is_file()
