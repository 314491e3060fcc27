"""The dashboard's Reindex button against a real `compozy serve` with its django-q2 cluster: the job the page
queues is picked up by the cluster and its page follows it to the result."""

from __future__ import annotations

import re
import time

import httpx

from bench.live import start_serve, stop_serve

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def test_a_reindex_started_from_the_dashboard_is_run_by_the_task_cluster(cli, tmp_path):
    assert cli("memory", "write", "--type", "project", "--name", "Cluster Job", "--description", "d",
               "--content", "Indexed again by the cluster.").code == 0
    server = start_serve(cli.home, cli.cwd, tmp_path / "serve.log", cluster=True)
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as client:
            opened = client.get(server.signin_link.removeprefix(server.base_url))
            token = server.signin_link.split("token=")[1]
            signed_in = client.post("/inspector/signin", data={
                "token": token, "next": "/inspector/", "csrfmiddlewaretoken": CSRF.search(opened.text).group(1)})
            assert signed_in.status_code == 302
            dashboard = client.get("/inspector/").text
            workspace = re.search(r'<option value="([0-9A-Z]{26})"', dashboard).group(1)
            started = client.post("/inspector/reindex", data={
                "workspace": workspace, "csrfmiddlewaretoken": CSRF.search(dashboard).group(1)})
            job_url = started.headers["location"]
            deadline = time.monotonic() + 60
            while True:
                page = client.get(job_url).text
                status = re.search(r"Status: <strong>(\w+)</strong>", page).group(1)
                if status not in ("queued", "running") or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
        assert status == "succeeded", page
        assert re.search(r"<dt>Files</dt><dd>1</dd>", page)
    finally:
        stop_serve(server)
