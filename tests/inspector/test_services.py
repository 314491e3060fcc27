"""The services the inspector added: event families, hourly activity, snapshot usage and reindex jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.domain.enums import EventOp, Origin
from memory.models import Event
from memory.services import events, jobs, snapshots
from memory.services.catalog import ReindexInput
from tests import helpers as h
from tests.recall import helpers as r


@pytest.mark.parametrize(("op", "family"), [
    (EventOp.WRITE_COMMITTED, "write"), (EventOp.WRITE_REVERTED, "write"), (EventOp.WRITE_REJECTED, "rejected"),
    (EventOp.RECALL_EXECUTED, "recall"), (EventOp.RECALL_SKIPPED, "recall"), (EventOp.DREAM_PROMOTED, "dream"),
    (EventOp.PROVIDER_COLLISION, "provider"), (EventOp.WORKSPACE_RELOCATED, "workspace"),
    (EventOp.DECISIONS_PRUNED, "decisions"),
])
def test_every_event_op_belongs_to_one_declared_family(op, family):
    assert events.family_of(op.value) == family
    assert family in events.FAMILIES
    assert op.value in events.ops_of(family)


def test_every_event_op_has_a_family_the_filter_offers():
    assert {events.family_of(op.value) for op in EventOp} <= set(events.FAMILIES)


@pytest.mark.django_db
def test_activity_counts_each_hour_of_the_window_by_family_and_only_this_workspace(home, workspace_dir, tmp_path):
    ws = r.ensure_workspace(workspace_dir)
    h.write(workspace_dir, name="Counted", content="A counted write.")
    r.search(workspace_dir, "counted write please")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)  # another checkout: workspaces are created only at one
    h.write(other, name="Elsewhere", content="Another workspace's write.")
    old = Event.objects.create(op=EventOp.WRITE_COMMITTED.value, workspace_id=ws, actor="cli", metadata={},
                               ts=Event.objects.latest("ts").ts - timedelta(days=8))
    activity = events.event_activity(data=events.ActivityInput.parse({"workspace": ws}),
                                     caller=h.caller(workspace_dir)).to_json()
    assert len(activity["buckets"]) == 168
    assert activity["totals"] == {"write": 1, "recall": 1, "rejected": 0}
    assert activity["buckets"][-1]["counts"] == {"write": 1, "recall": 1, "rejected": 0}
    assert old.ts < events.parse_since(activity["start"])


@pytest.mark.django_db
def test_snapshot_usage_lists_the_sessions_of_this_workspace_that_saw_a_memory(home, workspace_dir, tmp_path):
    h.write(workspace_dir, name="Seen", type="user", content="A global memory every session sees.")
    r.snapshot(workspace_dir, session_id="here-1")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)  # another checkout: workspaces are created only at one
    r.ensure_workspace(other)
    r.snapshot(other, session_id="there-1")
    usage = snapshots.snapshot_usage(data=snapshots.SnapshotUsageInput.parse({"filename": "user_seen.md"}),
                                     caller=h.caller(workspace_dir)).to_json()
    assert [s["session_id"] for s in usage["sessions"]] == ["here-1"]
    assert usage["root_key"] == "global"


@pytest.mark.django_db
def test_a_reindex_job_runs_once_and_records_progress_and_result(home, workspace_dir):
    h.write(workspace_dir, name="Jobbed", content="Indexed by a job.")
    job = jobs.reindex_job_start(data=ReindexInput.parse({"workspace": str(workspace_dir)}),
                                 caller=h.caller(workspace_dir, Origin.HTTP))
    assert job.status == "queued"
    jobs.job_run(job_id=job.id)
    jobs.job_run(job_id=job.id)  # a retried task finds the job finished and does nothing
    done = jobs.job_get(data=jobs.JobIdInput.parse({"job_id": job.id}), caller=h.caller(workspace_dir))
    assert (done.status, done.done, done.total, done.result["files"]) == ("succeeded", 1, 1, 1)
    assert Event.objects.filter(op=EventOp.WRITE_REINDEX.value).count() == 1


def test_the_inspector_imports_nothing_of_memory_but_its_services():
    import ast
    from pathlib import Path

    inspector = Path(__file__).resolve().parents[2] / "inspector"
    reached = set()
    for source in inspector.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                reached.add(node.module)
            elif isinstance(node, ast.Import):
                reached.update(alias.name for alias in node.names)
    memory_modules = {name for name in reached if name == "memory" or name.startswith("memory.")}
    assert memory_modules, "the scan found no import of memory at all"
    # memory.bootstrap is process start (migrate a fresh home), which `compozy inspector link` needs like every command.
    allowed = ("memory.services", "memory.bootstrap")
    assert {name for name in memory_modules if not name.startswith(allowed)} == set()
