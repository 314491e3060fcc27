"""What queues extraction and what a run reads: persisted assistant turns of eligible sessions, one run per session
at a time with later requests coalesced, the skip rules, the empty-snapshot drop, the deadline, and the turns since
the last extracted seq. Sessions go through the real ledger services; the cluster's queue is django-q2's ORM
broker, read back to see what was queued."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from memory.domain.enums import Origin
from memory.domain.extraction import StagedCandidate
from memory.domain.models import utc_now
from memory.models import Decision, Event, ExtractorSession
from memory.services import extractor as svc
from memory.services.inputs import Caller
from memory.store.roots import global_root
from tests.sessions import helpers as s

pytestmark = pytest.mark.django_db


def queued() -> list[tuple[str, tuple]]:
    """(function, args) of every task waiting in the cluster's queue."""
    tasks = [SignedPackage.loads(row.payload) for row in OrmQ.objects.order_by("id")]
    return [(task["func"], task["args"]) for task in tasks]


def runs_queued() -> list[tuple]:
    return [args for func, args in queued() if func == "memory.background.tasks.run_extraction"]


def events(op: str) -> list[Event]:
    return list(Event.objects.filter(op=op).order_by("id"))


def append_turn(cwd, session: str, turn: str, ask: str, answer: str, callbacks, *, tools: list[str] = ()) -> None:
    rows = [{"kind": "user_message", "content": ask, "turn_id": turn}]
    rows += [{"kind": "tool_call", "content": name, "data": {"name": name, "input": {}}, "turn_id": turn}
             for name in tools]
    rows += [{"kind": "assistant_message", "content": answer, "turn_id": turn},
             {"kind": "done", "content": "", "turn_id": turn}]
    with callbacks(execute=True):
        s.append(cwd, session, rows)


def run_queued(session: str):
    [args] = [args for args in runs_queued() if args[0] == session][-1:]
    OrmQ.objects.all().delete()
    return svc.extractor_run(session_id=args[0], run_id=args[1])


def staged(result) -> list[StagedCandidate]:
    text = (global_root() / result.staged_file).read_text()
    return [StagedCandidate.model_validate_json(line) for line in text.splitlines()]


def test_a_persisted_assistant_turn_queues_one_run_of_its_session(home, workspace_dir,
                                                                   django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-q")
    append_turn(workspace_dir, "sess-q", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    [(session, run_id)] = runs_queued()
    state = ExtractorSession.objects.get(session_id="sess-q")
    assert (session, run_id, state.status) == ("sess-q", state.run_id, "queued")
    result = svc.extractor_run(session_id=session, run_id=run_id)
    assert result.outcome == "completed" and result.candidate_count == 1
    [line] = staged(result)
    assert (line.memory.attribute, line.source.from_seq, line.source.until_seq) == ("editor", 1, 3)
    [started] = events("memory.extractor.started")
    [completed] = events("memory.extractor.completed")
    assert completed.metadata["candidate_count"] == 1 and completed.session_id == "sess-q"
    assert started.actor == completed.actor == "extractor"
    assert ("memory.background.tasks.drain_extractor_inbox", ()) in queued()
    assert ExtractorSession.objects.get(session_id="sess-q").status == "idle"


@pytest.mark.parametrize(("fields", "reason"), [
    ({"session_type": "dream"}, "dream_session"),
    ({"session_type": "system"}, "system_session"),
    ({"parent_session_id": "sess-parent"}, "subagent"),
])
def test_dream_and_system_sessions_and_sub_agents_are_never_extracted(home, workspace_dir,
                                                                       django_capture_on_commit_callbacks,
                                                                       fields, reason):
    s.start(workspace_dir, "sess-parent")
    s.start(workspace_dir, "sess-skip", **fields)
    append_turn(workspace_dir, "sess-skip", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    assert runs_queued() == [] and not ExtractorSession.objects.filter(session_id="sess-skip").exists()
    assert svc.extractor_request(session_id="sess-skip", turn_id="t1", seq=2).reason == reason


def test_a_turn_that_wrote_memory_explicitly_is_neither_queued_nor_read_again(home, workspace_dir,
                                                                             django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-w")
    for tool in ("compozy__memory_note", "mcp__compozy__compozy__memory_propose"):
        append_turn(workspace_dir, "sess-w", f"t-{tool}", "Remember that our staging database is on port 5433.",
                    "Saved it.", django_capture_on_commit_callbacks, tools=[tool])
        assert runs_queued() == []
        assert svc.extractor_request(session_id="sess-w", turn_id=f"t-{tool}", seq=3).reason == "wrote_memory"
    append_turn(workspace_dir, "sess-w", "t3", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    result = run_queued("sess-w")
    assert [line.memory.attribute for line in staged(result)] == ["editor"]  # not the staging database twice


def test_requests_while_a_run_is_queued_are_coalesced_into_it_up_to_the_limit(home, workspace_dir, monkeypatch,
                                                                              django_capture_on_commit_callbacks):
    monkeypatch.setenv("COMPOZY_MEMORY__EXTRACTOR__COALESCE_MAX", "3")
    s.start(workspace_dir, "sess-c")
    texts = ["My editor is helix.", "I prefer tabs.", "Our CI runs nightly.", "I live in Lisbon.",
             "We use pnpm for package management.", "My shell is fish.", "I prefer dark themes."]
    for index, text in enumerate(texts):
        append_turn(workspace_dir, "sess-c", f"t{index}", text, "Noted.", django_capture_on_commit_callbacks)
    assert len(runs_queued()) == 1
    assert [e.metadata["pending"] for e in events("memory.extractor.coalesced")] == [1, 2, 3]
    [dropped] = events("memory.extractor.dropped")  # three requests dropped, one event for the run
    assert dropped.metadata == {"reason": "coalesce_full", "pending": 3}
    status = svc.extractor_status(data=svc.ExtractorStatusInput(), caller=Caller(origin=Origin.CLI))
    assert status.queue.pending_requests == 3  # the limit, not the marker one past it
    result = run_queued("sess-c")
    assert result.candidate_count == len(texts)  # the one run read every turn that arrived while it waited
    assert runs_queued() == [] and ExtractorSession.objects.get(session_id="sess-c").status == "idle"


@pytest.mark.django_db(transaction=True)
def test_requests_while_a_run_is_in_progress_get_exactly_one_follow_up_run(home, workspace_dir, monkeypatch,
                                                                           completions):
    line = {"type": "user", "scope": "global", "agent_tier": None, "content": "My editor is helix.",
            "evidence": [1], "entity": "user", "attribute": "editor"}
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__KIND", "openai")
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__BASE_URL", completions.url)
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__MODEL", "m")
    s.start(workspace_dir, "sess-p")
    s.append(workspace_dir, "sess-p", [{"kind": "user_message", "content": "My editor is helix.", "turn_id": "t1"},
                                       {"kind": "assistant_message", "content": "Noted.", "turn_id": "t1"}])
    [(session, run_id)] = runs_queued()
    OrmQ.objects.all().delete()

    def answer(_request: dict) -> tuple[int, str]:
        # While the provider thinks, the agent answers twice more: both requests fold into one follow-up.
        for n in (2, 3):
            svc.extractor_request(session_id="sess-p", turn_id=f"t{n}", seq=2)
        return 200, json.dumps(line)

    completions.answer = answer
    result = svc.extractor_run(session_id=session, run_id=run_id)
    assert result.outcome == "completed" and len(completions.requests) == 1
    assert [e.metadata["status"] for e in events("memory.extractor.coalesced")] == ["running", "running"]
    [(follow_session, follow_run)] = runs_queued()
    assert follow_session == "sess-p" and follow_run != run_id
    assert ExtractorSession.objects.get(session_id="sess-p").status == "queued"


def test_a_run_past_its_deadline_is_taken_over_and_its_late_finish_changes_nothing(home, workspace_dir,
                                                                                   django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-d")
    append_turn(workspace_dir, "sess-d", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    [(_session, stale_run)] = runs_queued()
    OrmQ.objects.all().delete()
    # The worker that took the run died: the session stays "running" until its deadline, then a request takes over.
    ExtractorSession.objects.filter(session_id="sess-d").update(status="running",
                                                                deadline_at=utc_now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert svc.extractor_request(session_id="sess-d", turn_id="t1", seq=2).outcome == "queued"
    [(_session, fresh_run)] = runs_queued()
    assert fresh_run != stale_run
    assert svc.extractor_run(session_id="sess-d", run_id=stale_run).outcome == "superseded"
    assert svc.extractor_run(session_id="sess-d", run_id=fresh_run).outcome == "completed"


def test_each_run_reads_only_the_turns_after_the_last_extracted_seq(home, workspace_dir,
                                                                   django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-n")
    append_turn(workspace_dir, "sess-n", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    first = run_queued("sess-n")
    append_turn(workspace_dir, "sess-n", "t2", "We use pnpm for package management.", "Noted.",
                django_capture_on_commit_callbacks)
    second = run_queued("sess-n")
    assert (first.from_seq, first.until_seq, second.from_seq, second.until_seq) == (1, 3, 4, 6)
    assert [line.memory.attribute for line in staged(second)] == ["tool for package management"]
    assert ExtractorSession.objects.get(session_id="sess-n").last_seq == 6


def test_a_correction_in_a_later_run_updates_the_memory_an_earlier_run_wrote(home, workspace_dir,
                                                                             django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-x")
    append_turn(workspace_dir, "sess-x", "t1", "My editor is vim.", "Noted.", django_capture_on_commit_callbacks)
    run_queued("sess-x")
    svc.extractor_drain(data=svc.DrainInput(), caller=None)
    append_turn(workspace_dir, "sess-x", "t2", "No, it's helix.", "Fixed.", django_capture_on_commit_callbacks)
    run_queued("sess-x")  # the earlier turns are its context: the correction knows its slot
    [drained] = svc.extractor_drain(data=svc.DrainInput(), caller=None).candidates
    assert (drained.op, drained.target_filename) == ("update", "user_editor.md")
    assert "My editor is helix." in (global_root() / "user_editor.md").read_text()
    assert [d.op for d in Decision.objects.order_by("decided_at")] == ["add", "update"]


def test_an_empty_projection_is_dropped_with_counters_only_and_never_sent(home, workspace_dir, monkeypatch, completions,
                                                                         django_capture_on_commit_callbacks):
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__KIND", "openai")
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__BASE_URL", completions.url)
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__MODEL", "m")
    s.start(workspace_dir, "sess-e")
    recalled = "<compozy_recall>My editor is helix. Remember the staging port is 5433.</compozy_recall>"
    append_turn(workspace_dir, "sess-e", "t1", recalled, "Here is what I recall.",
                django_capture_on_commit_callbacks)
    result = run_queued("sess-e")
    assert result.outcome == "dropped" and completions.requests == []
    assert events("memory.extractor.started") == []  # it never started provider work
    [dropped] = events("memory.extractor.dropped")
    assert dropped.metadata["reason"] == "empty_snapshot"
    assert all(isinstance(value, int) for key, value in dropped.metadata.items() if key != "reason")
    assert "helix" not in json.dumps(dropped.metadata) and "5433" not in json.dumps(dropped.metadata)
    assert not (global_root() / "_inbox").exists()


def test_the_extractor_can_be_turned_off(home, workspace_dir, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setenv("COMPOZY_MEMORY__EXTRACTOR__ENABLED", "false")
    s.start(workspace_dir, "sess-off")
    append_turn(workspace_dir, "sess-off", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    assert runs_queued() == []


def test_a_run_whose_provider_fails_is_a_failed_event_and_a_dead_letter_that_replays_from_the_same_turns(
        home, workspace_dir, monkeypatch, completions, django_capture_on_commit_callbacks):
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__KIND", "openai")
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__BASE_URL", completions.url)
    monkeypatch.setenv("COMPOZY_MEMORY__PROVIDER__MODEL", "m")
    completions.status = 500
    s.start(workspace_dir, "sess-f")
    append_turn(workspace_dir, "sess-f", "t1", "My editor is helix.", "Noted.", django_capture_on_commit_callbacks)
    failed = run_queued("sess-f")
    assert failed.outcome == "failed" and failed.staged_file is None
    [name] = failed.failures
    [event] = events("memory.extractor.failed")
    assert event.metadata["failures"] == [name] and event.session_id == "sess-f"
    assert events("memory.extractor.completed") == []
    record = svc.extractor_failure_get(name=name)
    assert (record.stage, record.source.session_id, record.source.from_seq, record.source.until_seq) == (
        "provider", "sess-f", 1, 3)
    # The session moved past those turns: only the replay reads them again.
    assert ExtractorSession.objects.get(session_id="sess-f").last_seq == 3

    completions.status = 200
    completions.reply = json.dumps({"type": "user", "scope": "global", "agent_tier": None,
                                    "content": "My editor is helix.", "evidence": [1], "entity": "user",
                                    "attribute": "editor"})
    replayed = svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=None)
    sent = json.loads(completions.requests[-1]["body"]["messages"][1]["content"])
    assert [turn["seq"] for turn in sent["turns"]] == [1, 2]
    [drained] = replayed.drain.candidates
    assert (replayed.stage, drained.op, drained.applied, drained.target_filename) == (
        "provider", "add", True, "user_editor.md")
    decision = Decision.objects.get(id=drained.decision_id)
    assert (decision.origin, decision.session_id) == ("extractor", "sess-f")
    assert "source_actor: extractor" in (global_root() / "user_editor.md").read_text()
    assert svc.extractor_failure_list(data=svc.FailureListInput(), caller=None).total == 0
    [completed] = events("memory.extractor.completed")
    assert completed.metadata["candidate_count"] == 1


def turn_rows(turn: str, ask: str, answer: str, *, tools: list[str] = ()) -> list[dict]:
    rows = [{"kind": "user_message", "content": ask, "turn_id": turn}]
    rows += [{"kind": "tool_call", "content": name, "data": {"name": name, "input": {}}, "turn_id": turn}
             for name in tools]
    return rows + [{"kind": "assistant_message", "content": answer, "turn_id": turn}]


def test_an_append_of_many_turns_is_one_request_and_queues_one_run(home, workspace_dir,
                                                                  django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-b")
    rows = [row for n in range(6) for row in turn_rows(f"t{n}", f"My editor number {n} is helix.", "Noted.")]
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "sess-b", rows)
    assert len(runs_queued()) == 1
    assert events("memory.extractor.coalesced") == [] and events("memory.extractor.dropped") == []
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "sess-b", turn_rows("t6", "I prefer tabs.", "Noted.") + turn_rows(
            "t7", "We use pnpm for package management.", "Noted."))
    assert [e.metadata["pending"] for e in events("memory.extractor.coalesced")] == [1]  # one for the append
    assert run_queued("sess-b").until_seq == 16


def test_an_append_is_queued_when_any_of_its_turns_did_not_write_memory(home, workspace_dir,
                                                                       django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-m")
    wrote = turn_rows("t1", "Remember that staging is on port 5433.", "Saved.", tools=["compozy__memory_note"])
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "sess-m", wrote)
    assert runs_queued() == []
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "sess-m", turn_rows("t2", "Remember the port is 5433.", "Saved.",
                                                    tools=["compozy__memory_propose"])
                 + turn_rows("t3", "My editor is helix.", "Noted."))
    assert len(runs_queued()) == 1
    assert [line.memory.attribute for line in staged(run_queued("sess-m"))] == ["editor"]


def test_a_stop_extracts_a_session_of_only_user_messages_with_its_relative_dates_resolved(
        home, workspace_dir, django_capture_on_commit_callbacks):
    s.start(workspace_dir, "two-people")
    rows = [{"kind": "user_message", "content": text, "agent_name": speaker, "ts": "2023-05-08T13:56:00Z"}
            for speaker, text in [("Caroline", "My editor is helix since yesterday."),
                                  ("Melanie", "Nice, I prefer vim.")]]
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "two-people", rows)
    assert runs_queued() == []  # no assistant turn: nothing asked for a run while the session ran
    with django_capture_on_commit_callbacks(execute=True):
        s.stop(workspace_dir, "two-people")
    result = run_queued("two-people")
    assert result.outcome == "completed" and result.candidate_count >= 1
    contents = [line.memory.content for line in staged(result)]
    assert any("yesterday (7 May 2023)" in content for content in contents), contents
    with django_capture_on_commit_callbacks(execute=True):
        s.start(workspace_dir, "two-people")
        s.stop(workspace_dir, "two-people")
    assert runs_queued() == []  # every turn was read: a second stop queues nothing
