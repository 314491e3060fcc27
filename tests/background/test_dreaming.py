"""Dreaming in process: the gates and their reasons, the candidate score and cap, the lock, a whole run, a failure
at each step, --force, retry, and the artifact kept out of snapshots and search."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from memory.controller.faults import DREAM_STEPS
from memory.domain.dreaming import candidate_score
from memory.domain.enums import EventOp, Origin
from memory.domain.models import utc_now
from memory.dreaming.lock import acquire, lock_state
from memory.models import Consolidation, Decision, DreamLock, Event, RecallSignal, Session
from memory.services import dreams, recall, snapshots
from memory.services.inputs import Caller
from tests import helpers as h
from tests.background.dreaming_helpers import (
    ready,
    retry,
    root_key,
    sessions,
    show,
    signal,
    stamped,
    status,
    trigger,
    workspace_id,
    write_memories,
)
from tests.sessions import helpers as ledger

pytestmark = pytest.mark.django_db


def ops(prefix: str = "memory.dream.") -> list[str]:
    return list(Event.objects.filter(op__startswith=prefix).order_by("id").values_list("op", flat=True))


# --- gates ---------------------------------------------------------------------------------------------------------


def test_each_gate_blocks_with_its_reason_and_what_it_waits_for(ws, monkeypatch):
    files = write_memories(ws, 6)

    monkeypatch.setenv("COMPOZY_MEMORY__DREAM__ENABLED", "false")
    assert trigger(ws)["reason"] == "disabled"
    monkeypatch.delenv("COMPOZY_MEMORY__DREAM__ENABLED")

    sessions(ws, 2)
    blocked = trigger(ws)
    assert (blocked["triggered"], blocked["reason"]) == (False, "sessions")
    assert "1 more completed session" in blocked["detail"]

    sessions(ws, 1, prefix="t")
    for filename in files[:4]:
        signal(root_key(ws), filename)
    blocked = trigger(ws)
    assert blocked["reason"] == "signal" and "4 unpromoted memories" in blocked["detail"]
    assert "1 more such candidate" in blocked["detail"]
    assert not DreamLock.objects.exists()  # the signal gate released the lock it had taken

    signal(root_key(ws), files[4])
    acquire(workspace_id(ws), owner="elsewhere:1:1:x", run_id="drm_" + "0" * 26, ttl_ms=3_600_000)
    blocked = trigger(ws)
    assert blocked["reason"] == "lock" and "drm_" + "0" * 26 in blocked["detail"]
    DreamLock.objects.all().delete()

    assert trigger(ws)["triggered"] is True
    blocked = trigger(ws)
    assert blocked["reason"] == "time" and "24 h" in blocked["detail"]
    assert Consolidation.objects.count() == 1
    assert status(ws)["gates"][1]["waiting_for"].endswith("from now)")


def test_status_shows_every_gate_even_after_one_blocks(ws):
    write_memories(ws, 2)
    gates = {g["gate"]: g for g in status(ws)["gates"]}
    assert list(gates) == ["disabled", "time", "sessions", "lock", "signal"]
    assert gates["sessions"]["passed"] is False and gates["signal"]["passed"] is False
    assert gates["signal"]["waiting_for"].startswith("5 more such candidate")


def test_the_sessions_gate_counts_sessions_since_the_last_successful_run(ws):
    ready(ws)
    assert trigger(ws)["triggered"] is True
    Consolidation.objects.update(finished_at=utc_now() - timedelta(hours=25))
    Session.objects.update(stopped_at=utc_now() - timedelta(hours=26))
    blocked = trigger(ws)
    assert blocked["reason"] == "sessions" and blocked["detail"].startswith("0 completed session")
    sessions(ws, 3, prefix="later")
    blocked = trigger(ws)
    assert blocked["reason"] == "signal"  # sessions pass now; the candidates were promoted by the first run


def test_the_sessions_gate_counts_stopped_user_and_coordinator_sessions_of_this_workspace_from_the_ledger(
        ws, tmp_path):
    from memory.controller.events import event_record
    from memory.dreaming import gates

    ledger.start(ws, "still-running")
    wid = workspace_id(ws)
    ledger.start(ws, "parent-1")
    ledger.start(ws, "child-1", parent_session_id="parent-1")
    ledger.stop(ws, "child-1")  # a sub-agent is part of its parent's session
    for session_id, kind in (("dream-1", "dream"), ("system-1", "system")):  # the machine's own work
        ledger.start(ws, session_id, session_type=kind)
        ledger.stop(ws, session_id)
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    ledger.start(other, "elsewhere-1")
    ledger.stop(other, "elsewhere-1")
    # A recall that named a session is no longer what counts: the ledger is.
    event_record(op=EventOp.RECALL_EXECUTED, workspace_id=wid, session_id="recall-only", actor="tool")
    assert gates.sessions_since(wid, None) == 0
    ledger.stop(ws, "still-running")
    ledger.start(ws, "coord-1", session_type="coordinator")
    ledger.stop(ws, "coord-1")
    assert gates.sessions_since(wid, None) == 2
    assert gates.sessions_since(wid, utc_now()) == 0  # stopped before the last successful run


# --- score ---------------------------------------------------------------------------------------------------------


def test_the_score_formula_on_fixed_signals():
    now = utc_now()
    parts = candidate_score(recall_count=1, recall_ema=0.5, last_recalled_at=now - timedelta(days=14),
                            updated_at=now - timedelta(days=28), now=now, half_life_days=14)
    assert (parts.frequency, parts.relevance) == (0.5, 0.5)
    assert parts.recency == pytest.approx(0.5) and parts.freshness == pytest.approx(0.25)
    assert parts.score == pytest.approx(0.30 * 0.5 + 0.35 * 0.5 + 0.20 * 0.5 + 0.15 * 0.25)
    full = candidate_score(recall_count=7, recall_ema=1.4, last_recalled_at=now, updated_at=now, now=now,
                           half_life_days=14)
    assert full.score == pytest.approx(1.0)  # frequency and relevance are capped at 1


def test_candidates_carry_the_score_of_their_signal(ws, monkeypatch):
    files = write_memories(ws, 6)
    for index, filename in enumerate(files):
        signal(root_key(ws), filename, count=2 + index, ema=0.9 - index * 0.05)
    sessions(ws, 3)
    run = trigger(ws)["dream"]
    by_file = {c["filename"]: c for c in run["candidates"]}
    first = by_file[files[0]]
    assert first["parts"]["frequency"] == 1.0 and first["parts"]["relevance"] == pytest.approx(0.9)
    assert first["score"] == pytest.approx(0.30 + 0.35 * 0.9 + 0.20 * first["parts"]["recency"]
                                           + 0.15 * first["parts"]["freshness"], abs=1e-5)
    assert [c["filename"] for c in run["candidates"]] == files  # best first


def test_signals_below_the_gates_are_not_candidates(ws):
    files = write_memories(ws, 8)
    signal(root_key(ws), files[0], count=1)  # recalled once
    signal(root_key(ws), files[1], ema=0.0, days_ago=60)  # scores under 0.75
    signal(root_key(ws), files[2], promoted=True)  # already promoted
    signal("global", files[3])  # not this workspace's root
    for filename in files[4:]:
        signal(root_key(ws), filename)
    gate = status(ws)["gates"][4]
    assert gate["detail"].startswith("4 unpromoted memories")


def test_at_most_twenty_candidates_are_chosen_best_first(ws):
    files = write_memories(ws, 25)
    for index, filename in enumerate(files):
        signal(root_key(ws), filename, ema=0.5 + index * 0.01)
    sessions(ws, 3)
    run = trigger(ws)["dream"]
    assert run["eligible"] == 25 and run["candidate_count"] == 20
    assert [c["filename"] for c in run["candidates"]] == list(reversed(files))[:20]
    assert sorted(f for f, _ in stamped()) == sorted(files[5:])


def test_the_cap_comes_from_configuration(ws, monkeypatch):
    monkeypatch.setenv("COMPOZY_MEMORY__DREAM__MAX_CANDIDATES", "5")
    ready(ws, count=8)
    assert trigger(ws)["dream"]["candidate_count"] == 5


# --- lock ----------------------------------------------------------------------------------------------------------


def test_a_stale_lock_is_taken_over_with_an_event_and_its_run_marked_failed(ws):
    ready(ws)
    stale_run = Consolidation.objects.create(
        id="drm_" + "1" * 26, workspace_id=workspace_id(ws), status="running", trigger="schedule", actor="schedule",
        owner="otherhost:4242:1:abcd", started_at=utc_now() - timedelta(hours=2))
    acquire(workspace_id(ws), owner=stale_run.owner, run_id=stale_run.id, ttl_ms=3_600_000,
            now=utc_now() - timedelta(hours=2))
    assert lock_state(workspace_id(ws)).stale(utc_now())

    result = trigger(ws)
    assert result["triggered"] is True and result["dream"]["status"] == "completed"
    assert "took over the stale lock of run " + stale_run.id in [g["detail"] for g in result["dream"]["gates"]]
    stale_run.refresh_from_db()
    assert stale_run.status == "failed" and stale_run.error["code"] == "memory.dream.stale_lock"
    takeover = Event.objects.get(op=EventOp.DREAM_FAILED.value, metadata__run=stale_run.id)
    assert takeover.metadata["reason"] == "stale_lock"
    assert takeover.metadata["taken_over_by"] == result["dream"]["id"]
    assert not DreamLock.objects.exists()


# --- a whole run ---------------------------------------------------------------------------------------------------


def test_a_whole_run_writes_artifact_and_synthesis_through_the_controller_then_stamps(ws, memory_root):
    files = ready(ws)
    result = trigger(ws)
    run = result["dream"]
    assert (result["triggered"], result["reason"], run["status"]) == (True, None, "completed")

    # the row: candidates, scores, timings
    assert run["candidate_count"] == 6 and run["promoted"] == 6
    assert {"gates_ms", "candidates_ms", "artifact_ms", "synthesis_ms", "submit_ms", "run_ms"} <= set(run["timings"])

    # the artifact, with every candidate and why it was chosen
    date = run["started_at"][:10]
    assert run["artifact"] == f"_system/dreaming/{date.replace('-', '')}-{run['id']}.md"
    artifact = (memory_root / run["artifact"]).read_text()
    for filename in files:
        assert f"`{filename}`" in artifact
    assert "0.30 frequency + 0.35 relevance" in artifact

    # the synthesis: one project memory, through the controller with origin dreaming
    decision = Decision.objects.get(id=run["decision_id"])
    assert (decision.origin, decision.op, decision.applied_at is not None) == ("dreaming", "add", True)
    synthesis = memory_root / decision.target_filename
    assert decision.target_filename == f"project_dreaming_synthesis_{date.replace('-', '_')}.md"
    text = synthesis.read_text()
    assert f"name: Dreaming synthesis {date}" in text and "## Project memories" in text
    assert "Workers retry failed jobs three times" in text  # a bounded snippet of each candidate
    for filename in files:
        assert f"`{filename}`" in text

    # stamped only now, with the run's id; the events in order; the lock released
    assert sorted(stamped()) == sorted((f, run["id"]) for f in files)
    assert ops() == ["memory.dream.run.started", "memory.dream.run.promoted"]
    assert not DreamLock.objects.exists()
    shown = show(ws, run["id"])
    assert shown["decision"]["id"] == decision.id and shown["artifact_text"] == artifact


def test_the_synthesis_groups_candidates_by_type(ws, memory_root):
    files = write_memories(ws, 3) + write_memories(ws, 3, memory_type="reference", start=3)
    for filename in files:
        signal(root_key(ws), filename)
    sessions(ws, 3)
    run = trigger(ws)["dream"]
    text = (memory_root / Decision.objects.get(id=run["decision_id"]).target_filename).read_text()
    project, reference = text.index("## Project memories"), text.index("## Reference memories")
    assert project < reference
    assert all(project < text.index(f) < reference for f in files[:3])
    assert all(text.index(f) > reference for f in files[3:])


def test_a_second_run_the_same_day_updates_the_synthesis_with_both_runs_candidates(ws, memory_root):
    first_files = ready(ws)
    first = trigger(ws)["dream"]
    second_files = write_memories(ws, 6, start=8)
    for filename in second_files:
        signal(root_key(ws), filename)
    second = trigger(ws, force=True)["dream"]
    assert second["status"] == "completed" and second["decision_op"] == "update"
    text = (memory_root / second["synthesis_filename"]).read_text()
    for filename in first_files + second_files:
        assert f"`{filename}`" in text
    assert second["synthesis_filename"] == first["synthesis_filename"]


def test_the_controller_deciding_noop_completes_the_run_without_stamping(ws, monkeypatch):
    ready(ws)
    # In rules mode a synthesis overlapping several memories is ambiguous, which the rules decide as noop.
    monkeypatch.setenv("COMPOZY_MEMORY__CONTROLLER__MODE", "rules")
    run = trigger(ws)["dream"]
    assert (run["status"], run["decision_op"], run["promoted"]) == ("completed", "noop", 0)
    assert stamped() == []
    assert ops() == ["memory.dream.run.started"]


# --- failures ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", DREAM_STEPS)
def test_a_failure_at_each_step_leaves_nothing_stamped(ws, monkeypatch, step, memory_root):
    ready(ws)
    monkeypatch.setenv("COMPOZY_FAULT_RAISE", step)
    run = trigger(ws)["dream"]
    name = step.removeprefix("dream_")
    assert (run["status"], run["error"]["step"]) == ("failed", name)
    assert "injected failure" in run["error"]["message"]
    assert stamped() == []
    assert not DreamLock.objects.exists()
    assert ops() == ["memory.dream.run.started", "memory.dream.run.failed"]
    record = json.loads((memory_root / "_system" / "dreaming" / "failures" / f"{run['id']}.json").read_text())
    assert record["step"] == name and record["status"] == "failed"
    if step == "dream_stamp":
        # The decision was durable before the failure: the memory exists, the signals stay unstamped.
        assert run["decision_op"] == "add" and Decision.objects.filter(id=run["decision_id"]).exists()

    monkeypatch.delenv("COMPOZY_FAULT_RAISE")
    retried = retry(ws, run["id"])
    assert retried["triggered"] is True and retried["dream"]["status"] == "completed"
    assert retried["dream"]["retry_of"] == run["id"]
    assert {r for _f, r in stamped()} == {retried["dream"]["id"]}


def test_only_a_failed_or_canceled_run_can_be_retried(ws):
    ready(ws)
    run = trigger(ws)["dream"]
    from memory.domain.errors import Conflict

    with pytest.raises(Conflict):
        retry(ws, run["id"])


def test_a_run_whose_lock_was_taken_over_meanwhile_is_canceled_and_stamps_nothing(ws, monkeypatch):
    ready(ws)
    from memory.dreaming import run as run_module

    real_submit = run_module.submit

    def submit_then_lose_lock(*args, **kwargs):
        outcome = real_submit(*args, **kwargs)
        DreamLock.objects.update(owner="thief:1:1:x")  # another runner took the lock over as stale
        return outcome

    monkeypatch.setattr(run_module, "submit", submit_then_lose_lock)
    run = trigger(ws)["dream"]
    assert run["status"] == "canceled" and run["error"]["code"] == "memory.dream.lock_lost"
    assert stamped() == []


# --- force ---------------------------------------------------------------------------------------------------------


def test_force_skips_time_and_sessions_but_never_the_lock_or_the_signal(ws):
    files = write_memories(ws, 6)
    for filename in files[:4]:
        signal(root_key(ws), filename)
    assert trigger(ws)["reason"] == "sessions"
    assert trigger(ws, force=True)["reason"] == "signal"  # force never skips the signal gate
    signal(root_key(ws), files[4])
    acquire(workspace_id(ws), owner="elsewhere:1:1:x", run_id="drm_" + "2" * 26, ttl_ms=3_600_000)
    assert trigger(ws, force=True)["reason"] == "lock"
    DreamLock.objects.all().delete()
    forced = trigger(ws, force=True)
    assert forced["triggered"] is True and forced["dream"]["forced"] is True
    gates = {g["gate"]: g for g in forced["dream"]["gates"]}
    assert gates["sessions"]["skipped"] is True and gates["lock"]["skipped"] is False
    signal(root_key(ws), files[5])
    write_more = write_memories(ws, 4, start=8)
    for filename in write_more:
        signal(root_key(ws), filename)
    assert trigger(ws)["reason"] == "time"
    assert trigger(ws, force=True)["triggered"] is True


# --- the artifact stays out of prompts and search ------------------------------------------------------------------


def test_the_artifact_is_never_in_a_snapshot_or_a_search_result(ws, memory_root):
    ready(ws)
    run = trigger(ws)["dream"]
    assert (memory_root / run["artifact"]).is_file()
    caller = Caller(origin=Origin.TOOL, cwd=ws, session_id="after")
    # Words only the artifact holds: its candidates table header.
    query = "frequency relevance recency freshness recalls"
    for include_system in (False, True):
        hits = recall.memory_search(data=recall.SearchInput(query=query, include_system=include_system),
                                    caller=caller).to_json()["results"]
        assert not [hit for hit in hits if hit["memory"]["filename"].startswith("_system/")]
    snapshot = snapshots.snapshot_assemble(data=snapshots.SnapshotInput(session_id="after", query=query),
                                           caller=caller).to_json()["text"]
    assert "_system" not in snapshot and run["artifact"] not in snapshot
    assert "frequency" not in snapshot
    # Health stays clean, even counting _system/.
    assert h.health(ws, include_system=True)["invalid_files"] == []


# --- the scheduled pass --------------------------------------------------------------------------------------------


def test_the_scheduled_pass_checks_only_workspaces_with_activity_since_their_last_run(ws, tmp_path):
    ready(ws)
    quiet = tmp_path / "quiet"
    (quiet / ".git").mkdir(parents=True)
    write_memories(quiet, 1)
    Event.objects.filter(workspace_id=workspace_id(quiet)).delete()
    from memory.background.tasks import dream_check

    first = dream_check()
    assert [(c["workspace_id"], c["triggered"]) for c in first["checked"]] == [(workspace_id(ws), True)]
    run = Consolidation.objects.get()
    assert (run.trigger, run.actor) == ("schedule", "schedule")
    Event.objects.filter(workspace_id=workspace_id(ws)).update(ts=run.started_at - timedelta(seconds=1))
    assert dream_check()["checked"] == []


def test_recall_signals_become_candidates_through_real_searches(ws, monkeypatch):
    """No fixed signals here: the searches an agent makes are what dreaming consolidates."""
    files = write_memories(ws, 6)
    queries = ["staging production weekdays releases", "pytest xdist workers suite",
               "edge caches static assets hour", "billing invoices schema migrations",
               "reviewers blocking findings file references", "workers retry failed jobs backoff"]
    for session in ("a", "b", "c"):
        ledger.start(ws, f"session-{session}")
        caller = Caller(origin=Origin.TOOL, cwd=ws, session_id=f"session-{session}")
        for query in queries:
            recall.memory_search(data=recall.SearchInput(query=query, top_k=1), caller=caller)
        ledger.stop(ws, f"session-{session}")  # a completed session, as the sessions gate counts them
    assert RecallSignal.objects.filter(recall_count=3).count() == 6
    run = dreams.dream_trigger(data=dreams.DreamTriggerInput(), caller=Caller(origin=Origin.CLI, cwd=ws)).to_json()
    assert run["triggered"] is True, run
    assert sorted(c["filename"] for c in run["dream"]["candidates"]) == sorted(files)


def test_sqlite_scores_candidates_exactly_as_the_reference_formula(ws, monkeypatch):
    """The candidate query scores in SQL; the domain function is the reference, and the Python path (used when
    SQLite has no math functions) must choose the same candidates with the same parts."""
    from memory.dreaming import candidates as module

    files = write_memories(ws, 12)
    for index, filename in enumerate(files):
        signal(root_key(ws), filename, count=1 + index % 4, ema=0.3 + index * 0.06, days_ago=index * 1.5)
    dream = __import__("compozy.config", fromlist=["get_config"]).get_config(None).memory.dream
    now = utc_now()
    in_sql = module.select_candidates(workspace_id(ws), dream, now=now)
    in_python = module._select_in_python(workspace_id(ws), dream, now=now)
    assert in_sql.eligible == in_python.eligible > 0
    # The signal gate's count (one aggregate, no rows) agrees with the selection's, in SQL and in Python.
    assert module.count_candidates(workspace_id(ws), dream, now=now) == in_sql.eligible
    monkeypatch.setattr(module, "_sql_math", False)
    assert module.count_candidates(workspace_id(ws), dream, now=now) == in_python.eligible
    assert [c.filename for c in in_sql.chosen] == [c.filename for c in in_python.chosen]
    for left, right in zip(in_sql.chosen, in_python.chosen, strict=True):
        for part in ("frequency", "relevance", "recency", "freshness"):
            assert getattr(left.parts, part) == pytest.approx(getattr(right.parts, part), abs=1e-6)


def test_health_summarizes_dreaming_for_the_workspace(ws):
    write_memories(ws, 1, start=7)
    assert h.health(ws)["dream"] == {"status": "enabled", "latest_run": None, "latest_status": None,
                                     "last_success_at": None}
    ready(ws)
    run = trigger(ws)["dream"]
    dream = h.health(ws)["dream"]
    assert (dream["latest_run"], dream["latest_status"]) == (run["id"], "completed")
    assert dream["last_success_at"] == run["finished_at"]
