"""The dashboard's Reindex button against a real `compozy serve` with its django-q2 cluster: the job the page
queues is picked up by the cluster and its page follows it to the result."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import httpx

from tests.conftest import COMPOZY
from tests.surfaces.test_serve import free_port

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def test_a_reindex_started_from_the_dashboard_is_run_by_the_task_cluster(cli):
    assert cli("memory", "write", "--type", "project", "--name", "Cluster Job", "--description", "d",
               "--content", "Indexed again by the cluster.").code == 0
    port = free_port()
    proc = subprocess.Popen([COMPOZY, "serve", "--bind", f"127.0.0.1:{port}"], cwd=cli.cwd, env=cli.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        link = ""
        while not link:
            line = proc.stdout.readline()
            assert line, "compozy serve exited before printing the sign-in link"
            found = re.search(r"(http://127\.0\.0\.1:\d+/inspector/signin\?token=\S+)", line)
            link = found.group(1) if found else ""
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    opened = client.get(link.removeprefix(base))
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the server never answered"
                    time.sleep(0.2)
            token = link.split("token=")[1]
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
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
