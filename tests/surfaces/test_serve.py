"""`compozy serve` and the task cluster are processes that can write: both replay at start."""

from __future__ import annotations

import os
import sqlite3
import stat

import httpx

from bench.live import start_serve, stop_serve


def unapplied(cli) -> int:
    connection = sqlite3.connect(cli.home / "compozy.db")
    return connection.execute("SELECT count(*) FROM memory_decisions WHERE applied_at IS NULL").fetchone()[0]


def crash_a_write(cli, name: str) -> None:
    result = cli("memory", "write", "--type", "project", "--name", name, "--description", "d",
                 "--content", f"Left half-done by a crash {name.lower()}.", COMPOZY_FAULT="after_decision_commit")
    assert result.code == 86
    assert unapplied(cli) == 1


def test_serve_listens_on_loopback_and_a_private_unix_socket_and_replays_at_start(cli, tmp_path, memory_root):
    crash_a_write(cli, "Server Replay")
    server = start_serve(cli.home, cli.cwd, tmp_path / "serve.log")
    try:
        response = httpx.get(f"{server.base_url}/healthz", timeout=5)
        assert response.json() == {"status": "ok"}
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path))) as client:
            assert client.get("http://localhost/healthz").json() == {"status": "ok"}
        assert stat.S_IMODE(os.stat(server.socket_path).st_mode) == 0o600
        assert unapplied(cli) == 0
        assert (memory_root / "project_server_replay.md").is_file()
    finally:
        stop_serve(server)


def test_serve_refuses_a_non_loopback_address(cli):
    result = cli("serve", "--bind", "0.0.0.0:8123")
    assert result.code != 0
    assert "loopback" in result.stderr


def test_the_task_cluster_replays_at_start(cli, memory_root):
    crash_a_write(cli, "Cluster Replay")
    result = cli("qcluster", "--run-once")
    assert result.code == 0, result.stderr
    assert unapplied(cli) == 0
    assert (memory_root / "project_cluster_replay.md").is_file()
