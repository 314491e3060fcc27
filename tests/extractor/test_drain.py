"""Staging and draining through the real controller: inbox files on disk, decisions in the log, memories on disk,
dead letters and their replay."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from compozy.config import load_config
from memory.controller.core import submit
from memory.domain.enums import Origin, Scope
from memory.domain.extraction import ExtractedMemory, RunSource, StagedCandidate, Turn
from memory.domain.models import Candidate, Frontmatter, Provenance, ScopeRef
from memory.extractor import inbox
from memory.extractor.drain import drain_inbox
from memory.extractor.extraction import SessionSource, extract_turns
from memory.models import Decision
from memory.services.inputs import Caller
from memory.services.resolution import resolve_workspace
from tests import helpers as h
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws_identity(home, workspace_dir):
    """The workspace created at workspace_dir, as the resolver's identity (its id and directory)."""
    return resolve_workspace(None, Caller(origin=Origin.CLI, cwd=workspace_dir), create=True)


def global_root(home: Path) -> Path:
    return home / "memory"


def extract(identity, session: str, *texts: str, first_seq: int = 1, context: list[Turn] | None = None):
    turns = [Turn(seq, "user", text) for seq, text in enumerate(texts, start=first_seq)]
    return extract_turns(source=SessionSource(session, "root-" + session, identity.id), turns=turns,
                         context=context or [], config=load_config())


def line(session: str, content: str, attribute: str, *, ws_id: str = "", scope: str = "global",
         memory_type: str = "user", seq: int = 1) -> str:
    memory = ExtractedMemory(type=memory_type, scope=scope, agent_tier=None, content=content, evidence=[seq],
                             entity="user", attribute=attribute)
    source = RunSource(session=session, root_session=session, from_seq=seq, until_seq=seq, workspace_id=ws_id)
    return StagedCandidate(source=source, memory=memory).line()


def test_a_run_stages_one_file_named_by_time_and_last_seq_with_its_source_on_every_line(ws_identity, home):
    outcome = extract(ws_identity, "sess-a", "My editor is helix.", "We use pnpm for package management.")
    path = global_root(home) / outcome.staged_file
    assert path.parent == global_root(home) / "_inbox" / "sess-a"
    assert path.name.endswith("-2.jsonl") and path.name[:8].isdigit()
    lines = [StagedCandidate.model_validate_json(text) for text in path.read_text().splitlines()]
    assert [(s.source.session, s.source.root_session, s.source.from_seq, s.source.until_seq) for s in lines] == \
        [("sess-a", "root-sess-a", 1, 2)] * 2


def test_the_drain_submits_every_candidate_as_the_extractor_and_empties_the_inbox(ws_identity, home):
    extract(ws_identity, "sess-a", "My editor is helix.", "We use pnpm for package management.")
    report = drain_inbox(load_config())
    assert report.ops == {"add": 2} and report.failures == []
    decisions = {d.target_filename: d for d in Decision.objects.all()}
    assert set(decisions) == {"user_editor.md", "project_tool_for_package_management.md"}
    assert {d.origin for d in decisions.values()} == {"extractor"}
    assert {d.session_id for d in decisions.values()} == {"sess-a"}
    user_file = global_root(home) / "user_editor.md"
    text = user_file.read_text()
    assert "source_actor: extractor" in text and "- sess-a" in text and "My editor is helix." in text
    assert (workspace_root(ws_identity.directory) / "project_tool_for_package_management.md").is_file()
    assert inbox.inbox_files(global_root(home)) == []


def test_files_are_drained_oldest_first_across_sessions(ws_identity, home):
    extract(ws_identity, "sess-b", "My editor is vim.")
    extract(ws_identity, "sess-a", "No, it's helix.", first_seq=5, context=[Turn(1, "user", "My editor is vim.")])
    report = drain_inbox(load_config())
    assert [c.session_id for c in report.candidates] == ["sess-b", "sess-a"]
    assert [c.op for c in report.candidates] == ["add", "update"]


def test_a_correction_updates_the_same_memory_through_the_entity_slot(ws_identity, home):
    extract(ws_identity, "sess-a", "Remember that our staging database is on port 5432.")
    drain_inbox(load_config())
    extract(ws_identity, "sess-a", "No, it's 5433.", first_seq=2,
            context=[Turn(1, "user", "Remember that our staging database is on port 5432.")])
    report = drain_inbox(load_config())
    [correction] = report.candidates
    assert correction.op == "update"
    memories = workspace_root(ws_identity.directory)
    assert sorted(p.name for p in memories.glob("reference_*.md")) == ["reference_staging_database.md"]
    assert "port 5433" in (memories / "reference_staging_database.md").read_text()
    decision = Decision.objects.get(id=correction.decision_id)
    trace = {entry["name"]: entry["passed"] for entry in decision.rule_trace}
    assert trace["entity_slot"] is True and trace["filename_collision"] is False


def test_a_partial_file_is_never_drained(ws_identity, home):
    session_dir = global_root(home) / "_inbox" / "sess-a"
    session_dir.mkdir(parents=True)
    # What a stager killed between its temp write and its rename leaves behind, and a file still being written.
    (session_dir / ".20250101T000000000000Z-3.jsonl.1234.abcd.compozy-tmp").write_text(
        line("sess-a", "My editor is helix.", "editor") + "\n")
    report = drain_inbox(load_config())
    assert report.files == [] and report.candidates == [] and Decision.objects.count() == 0


def test_the_sweep_removes_only_hour_old_temps_and_idle_session_dirs_and_walks_at_most_once_a_minute(ws_identity, home,
                                                                                                    monkeypatch):
    inbox_dir = global_root(home) / "_inbox"
    live, dead, idle = inbox_dir / "sess-live", inbox_dir / "sess-dead", inbox_dir / "sess-idle"
    for folder in (live, dead, idle):
        folder.mkdir(parents=True)
    young = live / ".20250101T000000000000Z-3.jsonl.1.a.compozy-tmp"
    old = dead / ".20250101T000000000000Z-3.jsonl.2.b.compozy-tmp"
    young.write_text("x")
    old.write_text("x")
    hour_ago = time.time() - inbox.STALE_TEMP_SECONDS - 5
    os.utime(old, (hour_ago, hour_ago))
    os.utime(idle, (hour_ago, hour_ago))
    clock = [1000.0]
    monkeypatch.setattr(inbox.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(inbox, "_last_sweep", None)
    drain_inbox(load_config())
    assert young.exists() and not old.exists() and not idle.exists() and live.is_dir()
    stale_again = live / ".20250101T000000000000Z-4.jsonl.3.c.compozy-tmp"
    stale_again.write_text("x")
    os.utime(stale_again, (hour_ago, hour_ago))
    clock[0] += inbox.SWEEP_INTERVAL_SECONDS - 1
    drain_inbox(load_config())
    assert stale_again.exists()  # swept less than a minute ago: this drain did not walk the inbox
    clock[0] += 1
    drain_inbox(load_config())
    assert not stale_again.exists() and young.exists()


def test_a_file_that_fails_moves_whole_to_the_dead_letters_with_its_stage(ws_identity, home):
    root = global_root(home)
    good = line("sess-a", "My editor is helix.", "editor")
    item = inbox.stage(root, session="sess-a", until_seq=2, lines=[good, good.replace('"content"', '"contents"')])
    staged_text = item.path.read_text()
    report = drain_inbox(load_config())
    [name] = report.failures
    assert name.endswith(f"-{item.path.name}.json")
    record = json.loads((root / "_system" / "extractor" / "failures" / name).read_text())
    assert set(record) == {"stage", "source", "error", "content", "recorded_at"}
    assert record["stage"] == "parse" and "line 2" in record["error"]
    assert record["content"] == staged_text
    assert record["source"]["file"] == f"_inbox/sess-a/{item.path.name}"
    assert inbox.inbox_files(root) == [] and Decision.objects.count() == 0


def test_a_dead_letter_replays_once_its_cause_is_fixed_and_replaying_again_changes_nothing(ws_identity, home, tmp_path):
    root = global_root(home)
    unknown = "01HXJ9YR4Q0000000000000001"
    lines = [line("sess-a", "My editor is helix.", "editor"),
             line("sess-a", "Our CI runs nightly.", "ci", ws_id=unknown, scope="workspace", memory_type="project")]
    inbox.stage(root, session="sess-a", until_seq=1, lines=lines)
    [name] = drain_inbox(load_config()).failures
    record = inbox.read_failure(root, name)
    assert record.stage == "resolve" and unknown in record.error
    # The first line was decided before the second failed; the memory exists once.
    assert list(Decision.objects.values_list("op", flat=True)) == ["add"]

    # The workspace becomes known here (as if it were opened on this machine), and the dead letter is replayed.
    staged_text = record.content.replace(unknown, ws_identity.id)
    inbox.remove_failure(root, name)
    inbox.stage(root, session="sess-a", until_seq=1, lines=staged_text.splitlines())
    replayed = drain_inbox(load_config())
    assert [c.op for c in replayed.candidates] == ["add", "add"]
    assert [c.applied for c in replayed.candidates] == [False, True]  # the first got its earlier decision back
    assert Decision.objects.count() == 2

    inbox.stage(root, session="sess-a", until_seq=1, lines=staged_text.splitlines())
    again = drain_inbox(load_config())
    assert [c.applied for c in again.candidates] == [False, False] and Decision.objects.count() == 2


def test_an_autonomous_candidate_never_overwrites_a_memory_whose_name_it_only_shares(ws_identity, home):
    h.write(ws_identity.directory, type="user", scope="global", name="Editor",
            content="The operator's own note on editors.")
    before = (global_root(home) / "user_editor.md").read_text()
    front = Frontmatter(name="Editor", description="d", type="user", scope="global",
                        provenance=Provenance(source_actor=Origin.EXTRACTOR))
    # No entity slot declared: the generated name alone must never make it an update.
    candidate = Candidate(ref=ScopeRef(scope=Scope.GLOBAL), origin=Origin.EXTRACTOR, frontmatter=front,
                          body="Something generated.", target_filename="user_editor.md", session_id="s")
    outcome = submit(candidate, root=global_root(home), config=load_config())
    assert outcome.decision.op == "noop" and (global_root(home) / "user_editor.md").read_text() == before


def test_a_candidate_the_scanner_rejects_is_a_reject_decision_not_a_dead_letter(ws_identity, home):
    # The policy keeps secrets out of the inbox; a line staged by hand meets the controller's scanner instead.
    inbox.stage(global_root(home), session="sess-a", until_seq=1,
                lines=[line("sess-a", "The token is sk-THISISASECRETVALUE1234567890.", "token")])
    report = drain_inbox(load_config())
    assert report.failures == [] and [(c.op, c.applied) for c in report.candidates] == [("reject", False)]
    assert Decision.objects.get().op == "reject"


def test_a_quiet_session_directory_is_not_listed_again_until_it_changes(ws_identity, home, monkeypatch):
    root = global_root(home)
    assert extract(ws_identity, "sess-a", "My editor is helix.").staged_file
    assert extract(ws_identity, "sess-b", "We use pnpm for package management.").staged_file
    drain_inbox(load_config())  # both emptied; their directories stay
    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path):
        listed.append(Path(path).name)
        return real_scandir(path)

    monkeypatch.setattr(inbox.os, "scandir", counting_scandir)
    # Changed within the racy window (made an hour long here): a directory is listed every time.
    monkeypatch.setattr(inbox, "QUIET_AFTER_NS", 3600 * 10**9)
    monkeypatch.setattr(inbox, "QUIET_AFTER_COARSE_NS", 3600 * 10**9)
    assert inbox.inbox_files(root) == [] and inbox.inbox_files(root) == []
    assert sorted(listed) == ["_inbox", "_inbox", "sess-a", "sess-a", "sess-b", "sess-b"]
    monkeypatch.setattr(inbox, "QUIET_AFTER_NS", 0)
    monkeypatch.setattr(inbox, "QUIET_AFTER_COARSE_NS", 0)
    time.sleep(0.05)  # past the file system clock's tick
    listed.clear()
    assert inbox.inbox_files(root) == [] and inbox.inbox_files(root) == []
    assert sorted(listed) == ["_inbox", "_inbox", "sess-a", "sess-b"]  # the second listing stat-ed them only
    # A file staged into a quiet directory changes it: it is listed and drained.
    staged = extract(ws_identity, "sess-a", "My shell is fish.", first_seq=2).staged_file
    listed.clear()
    assert [item.relative for item in inbox.inbox_files(root)] == [staged]
    assert sorted(listed) == ["_inbox", "sess-a"]
    report = drain_inbox(load_config())
    assert report.files == [staged] and inbox.inbox_files(root) == []
    # So is a claimed file a dead drain left behind.
    (root / "_inbox" / "sess-b" / "20250101T000000000000Z-9.jsonl.processing").write_text("")
    assert [item.relative for item in inbox.inbox_files(root)] == ["_inbox/sess-b/20250101T000000000000Z-9.jsonl"]


def test_a_directory_is_remembered_only_once_its_last_change_is_older_than_the_clock_tick():
    from types import SimpleNamespace

    now = 1_800_000_000 * 10**9
    fine = now - inbox.QUIET_AFTER_NS - 123_457  # ext4: the kernel's coarse clock, nanoseconds
    assert inbox._settled(SimpleNamespace(st_mtime_ns=fine, st_ctime_ns=fine), now)
    assert not inbox._settled(SimpleNamespace(st_mtime_ns=fine, st_ctime_ns=fine + 200_000), now)
    assert not inbox._settled(SimpleNamespace(st_mtime_ns=now + 10**9, st_ctime_ns=fine), now)  # a future mtime
    whole = now - 10**9  # a file system that keeps seconds: one second is within its tick
    assert not inbox._settled(SimpleNamespace(st_mtime_ns=whole, st_ctime_ns=whole), now)
    assert inbox._settled(SimpleNamespace(st_mtime_ns=now - 3 * 10**9, st_ctime_ns=now - 3 * 10**9), now)


def test_a_fact_about_another_subject_is_a_new_memory_not_an_update_of_the_same_fact_about_this_one(ws_identity, home):
    # Issue 24 item 14: "the test database listens on port 6543" overwrote "the staging database listens on port
    # 6543" (tiebreaker, word jaccard 0.67). The subject differs: these are two memories.
    extract(ws_identity, "sess-a", "Remember that the staging database listens on port 6543.",
            "Remember that the staging database backups run nightly on port 6543.")
    drain_inbox(load_config())
    extract(ws_identity, "sess-b", "Remember that the test database listens on port 6543.")
    report = drain_inbox(load_config())
    [candidate] = report.candidates
    assert candidate.op == "add", Decision.objects.get(id=candidate.decision_id).rule_trace
    memories = workspace_root(ws_identity.directory)
    texts = [p.read_text() for p in memories.glob("reference_*.md")]
    assert any("staging database listens on port 6543" in text for text in texts)
    assert any("test database listens on port 6543" in text for text in texts)
