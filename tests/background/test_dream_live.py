"""End to end: a live `compozy serve` (gunicorn and the django-q2 cluster, nothing else started), agents recalling
memories over the API in three sessions, and the cluster's schedule running dreaming by itself. The check
interval is shortened through configuration to one minute (django-q2's scheduler itself wakes every 30 s)."""

from __future__ import annotations

import time

import httpx

from bench.live import start_serve, stop_serve
from tests.background.dreaming_helpers import SUBJECTS
from tests.helpers import workspace_root

QUERIES = ["staging production weekdays releases", "pytest xdist workers suite", "edge caches static assets hour",
           "billing invoices schema migrations", "reviewers blocking findings file references",
           "workers retry failed jobs backoff"]


def test_the_cluster_schedule_dreams_after_agents_recall(tmp_path):
    home, workspace = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    (home / "config.toml").write_text("[memory.dream]\ncheck_every_minutes = 1\n")
    server = start_serve(home, workspace, tmp_path / "serve.log", cluster=True)
    try:
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path)), base_url="http://localhost",
                              timeout=30)
        ws = str(workspace)
        files = []
        for name, body in SUBJECTS[:6]:
            response = client.post("/api/memory", json={"type": "project", "name": name, "description": name,
                                                        "content": body, "workspace": ws})
            assert response.status_code == 200, response.text
            files.append(response.json()["decision"]["target_filename"])
        for session in ("agent-a", "agent-b", "agent-c"):
            started = client.post("/api/sessions", json={"session_id": session, "workspace": ws})
            assert started.status_code == 200, started.text
            for query in QUERIES:
                response = client.post("/api/memory/search", json={"query": query, "top_k": 1, "workspace": ws},
                                       headers={"X-Compozy-Session": session})
                assert response.status_code == 200 and response.json()["results"], response.text
            # A stopped session is a completed one: the sessions gate counts it from the ledger.
            stopped = client.post(f"/api/sessions/{session}/stop", json={"workspace": ws})
            assert stopped.status_code == 200, stopped.text
        status = client.get("/api/memory/dreams/status", params={"workspace": ws}).json()
        assert status["ready"] is True, status
        assert status["schedule"]["every_minutes"] == 1

        deadline = time.monotonic() + 240
        runs: list[dict] = []
        while time.monotonic() < deadline:
            runs = client.get("/api/memory/dreams", params={"workspace": ws}).json()["dreams"]
            if runs and runs[0]["status"] != "running":
                break
            time.sleep(2)
        assert runs, "the schedule never ran dreaming:\n" + server.output()[-3000:]
        run = runs[0]
        # The cluster created its schedule when it started; the status names its next check.
        assert client.get("/api/memory/dreams/status", params={"workspace": ws}).json()["schedule"]["next_check_at"]
        assert (run["trigger"], run["actor"], run["status"]) == ("schedule", "schedule", "completed"), run
        shown = client.get(f"/api/memory/dreams/{run['id']}", params={"workspace": ws}).json()
        assert sorted(c["filename"] for c in shown["dream"]["candidates"]) == sorted(files)
        assert shown["decision"]["origin"] == "dreaming" and shown["decision"]["op"] == "add"
        assert (workspace_root(workspace) / shown["decision"]["target_filename"]).is_file()
    finally:
        stop_serve(server)
