"""Issue 24 items 3 and 7: a full or read-only filesystem and a database held by another process, through the
real CLI. The filesystems are real tmpfs mounts made here (we may be root in a container); where mounting is not
allowed the tests are skipped, saying so."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.crash_loop import fill
from tests.conftest import Cli
from tests.helpers import workspace_root
from tests.trust.helpers import new_checkout, tmpfs


def write(cli: Cli, cwd: Path, name: str, content: str, **env: str):
    return cli("memory", "write", "--scope", "workspace", "--type", "project", "--name", name,
               "--description", f"About {name}", "--content", content, "-o", "json", cwd=cwd, **env)


def temp_files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.compozy-tmp"))


def test_a_write_on_a_full_disk_fails_cleanly_before_deciding_and_other_workspaces_keep_working(
        cli: Cli, tmp_path: Path) -> None:
    other = new_checkout(tmp_path / "other")
    assert write(cli, other, "Other fact", "The other project deploys on Fridays.").code == 0
    with tmpfs(tmp_path / "full") as mount:
        full = new_checkout(mount / "project")
        assert write(cli, full, "First fact", "The first fact fits.").code == 0
        fill(mount)
        failed = write(cli, full, "Second fact", "This one does not fit on the disk any more. " * 20)
        assert failed.code == 10, (failed.stdout, failed.stderr)
        error = json.loads(failed.stdout)
        assert error["code"] == "memory.storage.full"
        assert "Traceback" not in failed.stderr
        assert temp_files(full / ".compozy") == []
        # Nothing was decided: the failed write can never land later behind anyone's back.
        decisions = cli("memory", "decisions", "list", "-o", "json", cwd=full).json["decisions"]
        assert [d["target_filename"] for d in decisions] == ["project_first_fact.md"]
        listed = cli("memory", "list", "-o", "json", cwd=other)
        assert listed.code == 0, listed.stderr
        assert [m["filename"] for m in listed.json["memories"] if m["scope"] == "workspace"] == [
            "project_other_fact.md"]
        assert cli("memory", "list", "-o", "json", cwd=full).code == 0


def decided_then_full(cli: Cli, mount: Path) -> tuple[Path, Path]:
    """A checkout on the tmpfs `mount` with one memory written, then a writer killed right after its second
    decision is durable, then the disk filled: the checkout and the filler file (remove it to free the space)."""
    full = new_checkout(mount / "project")
    assert write(cli, full, "First fact", "The first fact fits.").code == 0
    killed = write(cli, full, "Second fact", "Decided before the disk filled.", COMPOZY_FAULT="after_decision_commit")
    assert killed.code == 86, killed.stderr
    return full, fill(mount)


def test_a_decision_that_cannot_be_applied_holds_its_root_only_and_lands_when_space_returns(
        cli: Cli, tmp_path: Path) -> None:
    other = new_checkout(tmp_path / "other")
    assert write(cli, other, "Other fact", "The other project deploys on Fridays.").code == 0
    with tmpfs(tmp_path / "full") as mount:
        full, filler = decided_then_full(cli, mount)
        # Every process replays first: one held root must not stop reads elsewhere, nor the home.
        listed = cli("memory", "list", "-o", "json", cwd=other)
        assert listed.code == 0, listed.stderr
        assert "Traceback" not in listed.stderr
        health = cli("memory", "health", "-o", "json", cwd=full)
        assert health.code == 0, health.stderr
        held = health.json["held_roots"]
        assert [(h["root_key"].split(":")[0], h["reason"]) for h in held] == [("workspace", "disk_full")]
        assert health.json["status"] == "degraded"
        # A new write in the held root is refused, before anything is decided.
        refused = write(cli, full, "Third fact", "Not now.")
        assert refused.code == 10 and json.loads(refused.stdout)["code"] == "memory.storage.full"
        filler.unlink()
        # Space is back: the next process (any command, in any workspace) applies the waiting decision.
        assert cli("memory", "list", "-o", "json", cwd=other).code == 0
        assert (workspace_root(full) / "project_second_fact.md").read_text().count(
            "Decided before the disk filled.") == 1
        after = cli("memory", "health", "-o", "json", cwd=full).json
        assert after["held_roots"] == [] and after["unapplied_decisions"] == 0
        assert "project_second_fact.md" in (workspace_root(full) / "MEMORY.md").read_text()
        assert temp_files(full / ".compozy") == []


def test_a_database_held_by_another_process_write_is_exit_6_controller_timeout_and_reads_still_work(
        cli: Cli, home: Path, workspace_dir: Path) -> None:
    assert write(cli, workspace_dir, "First fact", "Written before the lock.").code == 0
    connection = sqlite3.connect(home / "compozy.db", isolation_level=None, check_same_thread=False)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("UPDATE memory_state SET value = value WHERE key = 'generation'")
    try:
        blocked = write(cli, workspace_dir, "Second fact", "Written while the database is held.")
        assert blocked.code == 6, (blocked.stdout, blocked.stderr)
        assert json.loads(blocked.stdout)["code"] == "memory.controller.timeout"
        assert "Traceback" not in blocked.stderr
        listed = cli("memory", "list", "-o", "json")
        assert listed.code == 0, listed.stderr
        assert [m["filename"] for m in listed.json["memories"]] == ["project_first_fact.md"]
    finally:
        connection.execute("ROLLBACK")
        connection.close()
    assert write(cli, workspace_dir, "Second fact", "Written after the lock.").code == 0


def test_a_read_only_home_serves_reads_and_refuses_writes_with_a_stable_code(cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "rohome", "64m") as mount:
        ro = Cli(home=mount, cwd=new_checkout(tmp_path / "project"))
        assert write(ro, ro.cwd, "First fact", "Written before the home went read-only.").code == 0
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
        listed = ro("memory", "list", "-o", "json")
        assert listed.code == 0, listed.stderr
        assert [m["filename"] for m in listed.json["memories"]] == ["project_first_fact.md"]
        refused = write(ro, ro.cwd, "Second fact", "Not on a read-only home.")
        assert refused.code == 10, (refused.stdout, refused.stderr)
        assert json.loads(refused.stdout)["code"] == "memory.storage.read_only"
        assert "Traceback" not in refused.stderr




# The cluster's side of `compozy serve`, without its start-up replay: the schedule the cluster was given, its
# function found by name as django-q finds it, and run once, as one tick of the schedule.
RUN_HELD_SCHEDULE = """
import json, os, pydoc, django
os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
django.setup()
from django_q.models import Schedule
from memory.background.schedules import HELD_SCHEDULE, ensure_schedules
ensure_schedules()
schedule = Schedule.objects.get(name=HELD_SCHEDULE)
print(json.dumps({"minutes": schedule.minutes, "result": pydoc.locate(schedule.func)()}))
"""


def test_the_servers_schedule_applies_a_held_decision_once_space_returns_and_health_clears(
        cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "full") as mount:
        full, filler = decided_then_full(cli, mount)
        health = cli("memory", "health", "-o", "json", cwd=full).json
        assert [h["reason"] for h in health["held_roots"]] == ["disk_full"]
        pending = health["held_roots"][0]["decision_id"]
        # While the disk is full, a tick of the schedule retries and the root stays held.
        tick = subprocess.run([sys.executable, "-c", RUN_HELD_SCHEDULE], env=cli.env(), cwd=full,
                              capture_output=True, text=True, timeout=120)
        assert tick.returncode == 0, tick.stderr
        assert json.loads(tick.stdout)["result"]["replayed"] == []
        filler.unlink()
        target = workspace_root(full) / "project_second_fact.md"
        tick = subprocess.run([sys.executable, "-c", RUN_HELD_SCHEDULE], env=cli.env(), cwd=full,
                              capture_output=True, text=True, timeout=120)
        assert tick.returncode == 0, tick.stderr
        ran = json.loads(tick.stdout)
        assert ran["minutes"] >= 1
        assert ran["result"] == {"replayed": [pending], "held_roots": []}
        assert target.read_text().count("Decided before the disk filled.") == 1
        assert "project_second_fact.md" in (workspace_root(full) / "MEMORY.md").read_text()
        after = cli("memory", "health", "-o", "json", cwd=full).json
        assert after["held_roots"] == [] and after["unapplied_decisions"] == 0 and after["status"] == "ok"
        with sqlite3.connect(cli.home / "compozy.db") as db:
            events = db.execute("SELECT op, decision_id, metadata FROM memory_events WHERE op LIKE 'memory.root.%' "
                                "ORDER BY id").fetchall()
        # The decision is named in metadata: its own event stays its only one.
        assert [(op, decision, json.loads(meta)["decision_id"]) for op, decision, meta in events] == [
            ("memory.root.held", None, pending), ("memory.root.released", None, pending)]
        assert json.loads(events[1][2])["applied"] == [pending]
