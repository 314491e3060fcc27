"""The file watcher against a real running `compozy serve`: hand edits, new files and deletions become origin-`file`
decisions through the reconcile path; editors' temp and swap files and `_system/` are ignored; a burst of saves is
one decision; the person's file is never rewritten. Waits poll for the outcome; nothing here asserts a duration."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from bench.live import LiveServe, start_serve, stop_serve
from memory.controller.watch import Debouncer, watched_name
from tests.helpers import workspace_root


def test_the_debouncer_makes_one_item_of_a_burst_and_waits_for_quiet():
    debouncer = Debouncer(quiet_s=0.3, max_delay_s=1.0)
    for moment in (0.0, 0.1, 0.2, 0.25):
        debouncer.note("workspace:x", "project_a.md", now=moment)
    assert debouncer.due(now=0.4) == []  # 0.15 s since the last save
    assert debouncer.due(now=0.56) == [("workspace:x", "project_a.md")]
    assert debouncer.due(now=0.6) == []


def test_continuous_saving_is_still_reconciled_after_the_maximum_delay():
    debouncer = Debouncer(quiet_s=0.3, max_delay_s=1.0)
    moment = 0.0
    while moment < 1.0:
        debouncer.note("global", "user_a.md", now=moment)
        assert debouncer.due(now=moment) == []
        moment += 0.1
    debouncer.note("global", "user_a.md", now=1.0)
    assert debouncer.due(now=1.0) == [("global", "user_a.md")]


@pytest.mark.parametrize("name, watched", [
    ("project_deploy.md", True), ("user_style.md", True), ("ad_hoc_20260101T000000Z_note.md", True),
    ("MEMORY.md", False), (".project_deploy.md.swp", False), ("project_deploy.md~", False),
    ("#project_deploy.md#", False), ("4913", False), (".project_deploy.md.123.abcd.compozy-tmp", False),
    ("project_deploy.md.swp", False), ("notes.txt", False),
])
def test_only_memory_document_names_are_watched(name, watched):
    assert watched_name(name) is watched


# --- against a live serve ------------------------------------------------------------------------------------------

DOC = """---
name: {name}
description: {description}
type: project
scope: workspace
---

{body}
"""


def decisions(home: Path, filename: str) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(home / "compozy.db")
    try:
        return db.execute("SELECT op, origin, post_content FROM memory_decisions WHERE target_filename = ? "
                          "AND applied_at IS NOT NULL ORDER BY decided_at, id", (filename,)).fetchall()
    finally:
        db.close()


def wait_for(home: Path, filename: str, count: int, timeout: float = 30.0) -> list[tuple[str, str, str]]:
    deadline = time.monotonic() + timeout
    found: list[tuple[str, str, str]] = []
    while time.monotonic() < deadline:
        found = decisions(home, filename)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{filename}: {len(found)} decision(s) after {timeout} s, {count} expected: {found}")


def live(tmp_path: Path, config: str = "") -> tuple[LiveServe, Path]:
    home, workspace = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (workspace / ".git").mkdir(parents=True)
    if config:
        (home / "config.toml").write_text(config)
    server = start_serve(home, workspace, tmp_path / "serve.log")
    return server, workspace


def api_write(server: LiveServe, workspace: Path, name: str, body: str) -> str:
    import httpx

    with httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path)), base_url="http://localhost",
                      timeout=30) as client:
        response = client.post("/api/memory", json={"type": "project", "name": name, "description": name,
                                                    "content": body, "workspace": str(workspace)})
    assert response.status_code == 200, response.text
    return response.json()["decision"]["target_filename"]


def test_hand_edits_new_files_and_deletions_become_file_decisions_under_a_live_serve(tmp_path):
    server, workspace = live(tmp_path)
    try:
        filename = api_write(server, workspace, "Deploy Pipeline", "Releases pass staging first.")
        root = workspace_root(workspace)
        path = root / filename

        edited = path.read_text().replace("Releases pass staging first.", "Releases pass staging, then canary.")
        path.write_text(edited)
        (op, origin, post), = wait_for(server.home, filename, 2)[1:]
        assert (op, origin, post) == ("update", "file", edited)
        assert path.read_text() == edited  # recorded, never rewritten

        new = root / "project_cache_policy.md"
        new.write_text(DOC.format(name="Cache Policy", description="Edge caching", body="Assets stay an hour."))
        (op, origin, _post), = wait_for(server.home, new.name, 1)
        assert (op, origin) == ("add", "file")
        assert "project_cache_policy.md" in (root / "MEMORY.md").read_text()

        new.unlink()
        assert [(d[0], d[1]) for d in wait_for(server.home, new.name, 2)] == [("add", "file"), ("delete", "file")]

        # A burst of saves is one decision, holding the last save.
        burst = root / "project_burst.md"
        for index in range(6):
            burst.write_text(DOC.format(name="Burst", description="Saved often", body=f"Save number {index}."))
            time.sleep(0.02)
        # Editors' leftovers and _system/ next to it, then a sentinel edit after all of them.
        for junk in (".project_burst.md.swp", "project_burst.md~", "4913", "#project_burst.md#"):
            (root / junk).write_text("scratch")
        (root / "_system" / "notes.md").write_text(DOC.format(name="Notes", description="n", body="System notes."))
        broken = root / "project_broken.md"
        broken.write_text("---\nname: [unclosed\n---\nbody\n")
        sentinel = root / "project_sentinel.md"
        sentinel.write_text(DOC.format(name="Sentinel", description="Last", body="Written after the others."))
        wait_for(server.home, sentinel.name, 1)
        burst_decisions = wait_for(server.home, burst.name, 1)
        assert len(burst_decisions) == 1 and "Save number 5." in burst_decisions[0][2]
        for name in (".project_burst.md.swp", "project_burst.md~", "4913", "#project_burst.md#", "_system/notes.md",
                     "project_broken.md"):
            assert decisions(server.home, name) == [], name
        assert broken.read_text() == "---\nname: [unclosed\n---\nbody\n"  # a broken file is left as it is
    finally:
        stop_serve(server)


def test_the_polling_fallback_records_a_hand_edit(tmp_path):
    server, workspace = live(tmp_path, "[memory.watch]\nbackend = \"polling\"\n")
    try:
        filename = api_write(server, workspace, "Queue Retries", "Workers retry three times.")
        path = workspace_root(workspace) / filename
        edited = path.read_text().replace("three times", "five times")
        path.write_text(edited)
        (op, origin, post) = wait_for(server.home, filename, 2)[1]
        assert (op, origin, post) == ("update", "file", edited)
    finally:
        stop_serve(server)


@pytest.mark.django_db(transaction=True)
def test_a_fifo_and_a_broken_file_are_logged_once_per_change_and_never_with_a_traceback(caplog):
    import logging
    import os

    from compozy.config import compozy_home
    from memory.controller.watch import WatchedRoot, Watcher
    from memory.domain.enums import Scope
    from memory.domain.models import ScopeRef

    root = compozy_home() / "memory"
    root.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "project_x.md")  # never opened blocking: no writer would ever come
    (root / "project_broken.md").write_text("---\nname: [broken\n---\nbody\n")
    watcher = Watcher(debounce_ms=0, max_delay_ms=0, backend="polling", poll_interval_ms=1000)
    watcher.roots = {"global": WatchedRoot(ScopeRef(scope=Scope.GLOBAL), root)}

    def rounds(count: int) -> list[logging.LogRecord]:
        caplog.clear()
        for _round in range(count):
            for name in ("project_x.md", "project_broken.md"):
                watcher.debouncer.note("global", name, now=0.0)  # as each of its own reads looked like a change
            watcher.reconcile_due()
        return [record for record in caplog.records if record.name == "compozy.memory.watcher"]

    with caplog.at_level(logging.INFO, logger="compozy.memory.watcher"):
        first = rounds(5)
        assert sorted(record.getMessage().split()[0] for record in first) == ["project_broken.md", "project_x.md"]
        assert not any(record.exc_info for record in first)
        (root / "project_broken.md").write_text("---\nname: [still broken, and longer\n---\nbody\n")
        again = rounds(5)
        assert [record.getMessage().split()[0] for record in again] == ["project_broken.md"]  # it changed once
