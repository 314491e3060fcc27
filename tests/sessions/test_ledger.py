"""The session ledger: the session row and its frozen snapshot, events in gap-free order, idempotent imports,
workspace isolation, and the reads and hook points the extractor and dreaming build on."""

from __future__ import annotations

import json
import subprocess

import pytest
from django.db import transaction

from memory.domain.errors import Conflict, NotFound, ValidationError
from memory.models import SessionEvent
from memory.sessions import signals
from tests import helpers as h
from tests.conftest import COMPOZY
from tests.sessions import helpers as s

pytestmark = pytest.mark.django_db


def test_starting_a_session_records_its_row_and_freezes_its_snapshot(home, workspace_dir):
    h.write(workspace_dir, name="Deploy Path", content="Deploys use the signed artifact path.")
    started = s.start(workspace_dir, "sess-1", agent_name="coder", session_type="coordinator", context_window=200_000)
    assert started["created"] is True
    session = started["session"]
    assert (session["type"], session["status"], session["agent_name"], session["context_window"]) == (
        "coordinator", "running", "coder", 200_000)
    assert "Deploy Path" in started["snapshot"]["text"]
    h.write(workspace_dir, name="Later Memory", content="Written after the session started.")
    again = s.start(workspace_dir, "sess-1")
    assert again["created"] is False
    assert again["snapshot"]["text"] == started["snapshot"]["text"]  # a delivered prompt is never rewritten
    assert "Later Memory" not in again["snapshot"]["text"]


def test_a_session_without_an_id_gets_a_ulid(home, workspace_dir):
    started = s.start(workspace_dir, None)
    assert len(started["session"]["session_id"]) == 26


def test_a_sub_agent_session_receives_its_parents_snapshot_bytes(home, workspace_dir):
    h.write(workspace_dir, name="Parent Fact", content="The parent saw this memory.")
    parent = s.start(workspace_dir, "parent-1")
    h.write(workspace_dir, name="Later Fact", content="Written before the sub-agent started.")
    child = s.start(workspace_dir, "child-1", parent_session_id="parent-1")
    assert child["snapshot"]["text"] == parent["snapshot"]["text"]
    assert child["session"]["parent_session_id"] == "parent-1"


def test_events_get_gap_free_sequence_numbers_in_order(home, workspace_dir):
    s.start(workspace_dir, "seq-1")
    first = s.append(workspace_dir, "seq-1", s.turn("t1", "Ask one.", "Answer one."))
    second = s.append(workspace_dir, "seq-1", s.turn("t2", "Ask two.", "Answer two."))
    assert (first["first_seq"], first["last_seq"], second["first_seq"], second["last_seq"]) == (1, 3, 4, 6)
    rows = s.events(workspace_dir, "seq-1")["events"]
    assert [row["seq"] for row in rows] == [1, 2, 3, 4, 5, 6]
    assert [row["kind"] for row in rows[:3]] == ["user_message", "assistant_message", "done"]
    assert rows[0]["agent_name"] is None and rows[0]["archived"] is False


def test_importing_the_same_external_key_twice_is_a_no_op(home, workspace_dir):
    s.start(workspace_dir, "import-1")
    rows = s.turn("t1", "Ask.", "Answer.")
    assert s.append(workspace_dir, "import-1", rows)["appended"] == 3
    again = s.append(workspace_dir, "import-1", rows + [{"kind": "user_message", "content": "New.",
                                                        "external_key": "new-1"}])
    # The two keyed rows are skipped; the unkeyed `done` row and the new line are appended.
    assert (again["appended"], again["duplicates"], again["first_seq"], again["last_seq"]) == (2, 2, 4, 5)
    twice_in_one_batch = s.append(workspace_dir, "import-1", [{"kind": "user_message", "external_key": "k"},
                                                              {"kind": "user_message", "external_key": "k"}])
    assert (twice_in_one_batch["appended"], twice_in_one_batch["duplicates"]) == (1, 1)


def test_appending_to_a_stopped_session_is_a_conflict_until_it_starts_again(home, workspace_dir):
    s.start(workspace_dir, "stop-1", session_type="system")
    s.stop(workspace_dir, "stop-1")
    with pytest.raises(Conflict) as refused:
        s.append(workspace_dir, "stop-1", [{"kind": "user_message", "content": "late"}])
    assert refused.value.details["reason"] == "session_stopped"
    assert s.start(workspace_dir, "stop-1")["session"]["status"] == "running"
    assert s.append(workspace_dir, "stop-1", [{"kind": "user_message", "content": "resumed"}])["appended"] == 1


def test_a_session_of_another_workspace_does_not_exist_here(home, workspace_dir, tmp_path):
    s.start(workspace_dir, "mine-1")
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").mkdir()
    s.start(other, "theirs-1")
    with pytest.raises(NotFound) as missing:
        s.events(workspace_dir, "theirs-1")
    # The message says where the session was looked for ("here" alone did not).
    mine = s.start(workspace_dir, "mine-1")["session"]["workspace_id"]
    assert missing.value.message == f"No session theirs-1 in workspace {workspace_dir.name} ({mine})."
    assert missing.value.details == {"session_id": "theirs-1", "workspace_id": mine}
    with pytest.raises(NotFound):
        s.append(workspace_dir, "theirs-1", [{"kind": "user_message"}])
    assert [x["session_id"] for x in s.listing(workspace_dir)["sessions"]] == ["mine-1"]
    with pytest.raises(Conflict):
        s.start(workspace_dir, "theirs-1")  # the id is taken by another workspace's session


def test_history_tells_what_happened_to_one_session_oldest_first_and_pages(home, workspace_dir, tmp_path):
    s.start(workspace_dir, "hist-1")
    s.start(workspace_dir, "hist-2")  # another session's operations are not this one's history
    s.append(workspace_dir, "hist-1", s.turn("t1", "Ask.", "Answer.") + s.turn("t2", "More?", "Done."))
    s.compact(workspace_dir, "hist-1")
    s.stop(workspace_dir, "hist-1")
    story = s.history(workspace_dir, "hist-1")
    ops = [event["op"] for event in story["events"]]
    assert ops[0] == "memory.session.started" and ops[-1] == "memory.session.stopped", ops
    assert "memory.session.compaction.archived" in ops
    assert {event["session_id"] for event in story["events"]} == {"hist-1"}
    times = [event["ts"] for event in story["events"]]
    assert times == sorted(times)
    # Compaction archives, never deletes: every row is still counted, and still readable in `session events`.
    assert story["rows"] == 6 and story["archived"] > 0
    assert len(s.events(workspace_dir, "hist-1")["events"]) == story["rows"]
    only = s.history(workspace_dir, "hist-1", family="session")["events"]
    assert only and all(event["op"].startswith("memory.session.") for event in only)
    first = s.history(workspace_dir, "hist-1", limit=2)
    second = s.history(workspace_dir, "hist-1", limit=2, cursor=first["page"]["next_cursor"])
    assert first["page"]["has_more"] and first["page"]["total"] == len(ops)
    assert [e["id"] for e in first["events"] + second["events"]] == [e["id"] for e in story["events"][:4]]
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    with pytest.raises(NotFound):
        s.history(other, "hist-1")  # another workspace's session does not exist there


def test_bad_events_are_refused_before_anything_is_stored(home, workspace_dir):
    s.start(workspace_dir, "bad-1")
    for event in ({"kind": "thought", "content": "x"}, {"kind": "user_message", "surprise": 1},
                  {"kind": "user_message", "ts": "yesterday"}):
        with pytest.raises(ValidationError):
            s.append(workspace_dir, "bad-1", [{"kind": "user_message", "content": "fine"}, event])
    assert s.events(workspace_dir, "bad-1")["events"] == []
    with pytest.raises(ValidationError):
        s.start(workspace_dir, "has spaces")


def test_events_after_a_seq_page_through_the_session_for_readers_such_as_the_extractor(home, workspace_dir):
    s.start(workspace_dir, "page-1")
    s.append(workspace_dir, "page-1", [{"kind": "user_message", "content": f"m{i}"} for i in range(7)])
    first = s.events(workspace_dir, "page-1", limit=3)
    assert [e["seq"] for e in first["events"]] == [1, 2, 3] and first["has_more"] and first["next_after_seq"] == 3
    rest = s.events(workspace_dir, "page-1", after_seq=first["next_after_seq"], limit=10)
    assert [e["seq"] for e in rest["events"]] == [4, 5, 6, 7] and not rest["has_more"]
    shown = s.show(workspace_dir, "page-1")["session"]
    assert (shown["type"], shown["parent_session_id"], shown["events"]) == ("user", None, 7)


@pytest.mark.django_db(transaction=True)
def test_hook_points_fire_after_the_rows_are_committed(home, workspace_dir):
    seen: list[tuple[str, dict]] = []

    def on_turns(sender, **kwargs):
        count = SessionEvent.objects.filter(session_id=kwargs["session_id"]).count()
        seen.append(("turns", {"turns": kwargs["turns"], "committed_rows": count}))

    def on_stop(sender, **kwargs):
        seen.append(("stop", {"type": kwargs["session_type"], "parent": kwargs["parent_session_id"]}))

    signals.assistant_turns_persisted.connect(on_turns)
    signals.session_stopped.connect(on_stop)
    try:
        s.start(workspace_dir, "hooks-1", session_type="system")
        with transaction.atomic():
            s.append(workspace_dir, "hooks-1", s.turn("t1", "Ask.", "Answer.") + s.turn("t2", "Next?", "Done."))
            assert seen == []  # nothing is announced before the commit
        s.stop(workspace_dir, "hooks-1")
    finally:
        signals.assistant_turns_persisted.disconnect(on_turns)
        signals.session_stopped.disconnect(on_stop)
    # One announcement for the append, naming each turn by its last assistant row.
    assert seen == [("turns", {"turns": (("t1", 2), ("t2", 5)), "committed_rows": 6}),
                    ("stop", {"type": "system", "parent": None})]


# ----- the CLI -------------------------------------------------------------------------------------------------


def test_cli_start_prints_the_same_bytes_as_memory_snapshot(cli):
    assert cli("memory", "write", "--type", "project", "--name", "Runtime Docs", "--description", "Where docs live",
               "--content", "Runtime docs live under packages/site.").code == 0
    started = cli("session", "start", "--session", "cli-1", "--agent", "coder")
    assert started.code == 0, started.stderr
    snapshot = cli("memory", "snapshot", "--session", "cli-1", "--agent", "coder")
    assert started.stdout == snapshot.stdout
    assert "Runtime Docs" in started.stdout


def test_cli_append_reads_json_lines_from_stdin_and_names_a_bad_line(cli):
    assert cli("session", "start", "--session", "cli-2").code == 0
    lines = "\n".join(json.dumps(row) for row in s.turn("t1", "Ask.", "Answer.")) + "\n"
    appended = cli("session", "append", "cli-2", "--jsonl", "-", "-o", "json", input=lines.encode())
    assert appended.code == 0, appended.stderr
    assert appended.json["appended"] == 3
    again = cli("session", "append", "cli-2", "--jsonl", "-", "-o", "json", input=lines.encode())
    assert (again.json["appended"], again.json["duplicates"]) == (1, 2)
    bad = cli("session", "append", "cli-2", "--jsonl", "-", "-o", "json",
              input=b'{"kind": "user_message"}\nnot json\n')
    assert bad.code == 2 and bad.json["code"] == "memory.validation" and "line 2" in bad.json["message"]
    with_data = json.dumps({"kind": "tool_call", "content": "Bash", "turn_id": "t2",
                            "data": {"name": "Bash", "input": {"command": "ls"}}})
    assert cli("session", "append", "cli-2", "--jsonl", with_data, "-o", "json").json["first_seq"] == 5
    single = cli("session", "append", "cli-2", "--kind", "tool_result", "--content", "file1", "--turn-id", "t2",
                 "-o", "json")
    assert single.code == 0 and single.json["first_seq"] == 6
    neither = cli("session", "append", "cli-2", "-o", "json")
    assert neither.code == 2 and neither.json["code"] == "memory.validation"
    listed = cli("session", "events", "cli-2", "-o", "json").json["events"]
    assert [e["seq"] for e in listed] == [1, 2, 3, 4, 5, 6]
    assert listed[4]["data"] == {"name": "Bash", "input": {"command": "ls"}}
    assert (listed[5]["kind"], listed[5]["turn_id"], listed[5]["content"]) == ("tool_result", "t2", "file1")


def test_cli_appenders_in_separate_processes_share_one_gap_free_sequence(cli):
    assert cli("session", "start", "--session", "procs-1").code == 0
    lines = "".join(json.dumps({"kind": "tool_result", "content": f"r{i}"}) + "\n" for i in range(25)).encode()
    processes = [subprocess.Popen([COMPOZY, "session", "append", "procs-1", "--jsonl", "-", "-o", "json"],
                                  cwd=cli.cwd, env=cli.env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(4)]
    for process in processes:
        out, err = process.communicate(lines, timeout=120)
        assert process.returncode == 0, err
    events = cli("session", "events", "procs-1", "-o", "json", "--limit", "1000").json["events"]
    assert [e["seq"] for e in events] == list(range(1, 101))


def test_the_external_key_lookup_of_an_append_uses_the_unique_key_index_not_a_walk_of_the_session(home):
    from django.db import connection

    from memory.sessions import ledger

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + ledger.stored_keys_sql(2).replace("%s", "?"), ["s-1", "a", "b"])
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "session_event_external_key" in plan, plan
