"""The operator's verbs over the extractor: drain, status, the dead letters and their replay."""

from __future__ import annotations

import pytest

from memory.domain.enums import Origin
from memory.domain.errors import CompozyError, NotFound, ValidationError
from memory.domain.extraction import ExtractedMemory, RunSource, StagedCandidate
from memory.extractor import inbox
from memory.models import Decision
from memory.services import extractor as svc
from memory.services.inputs import Caller
from memory.services.resolution import resolve_workspace
from memory.store.workspace import create_identity
from tests.extractor.helpers import dead_letter
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db
CALLER = Caller(origin=Origin.CLI)


def staged_line(content: str, attribute: str, *, ws_id: str = "", scope: str = "global", kind: str = "user") -> str:
    memory = ExtractedMemory(type=kind, scope=scope, agent_tier=None, content=content, evidence=[3],
                             entity="user", attribute=attribute)
    return StagedCandidate(source=RunSource(session="sess-s", root_session="sess-s", from_seq=1, until_seq=3,
                                            workspace_id=ws_id), memory=memory).line()


def test_drain_reports_each_candidates_decision(ws, home):
    inbox.stage(home / "memory", session="sess-s", until_seq=3,
                lines=[staged_line("My editor is helix.", "editor"), staged_line("I prefer tea.", "preference tea")])
    result = svc.extractor_drain(data=svc.DrainInput(), caller=CALLER).to_json()
    assert result["ops"] == {"add": 2} and result["failures"] == []
    assert [(c["target_filename"], c["session_id"], c["line"]) for c in result["candidates"]] == [
        ("user_editor.md", "sess-s", 1), ("user_preference_tea.md", "sess-s", 2)]
    assert {c["decision_id"] for c in result["candidates"]} == set(Decision.objects.values_list("id", flat=True))


def test_status_counts_the_inbox_the_claimed_files_and_the_dead_letters(ws, home):
    root = home / "memory"
    inbox.stage(root, session="sess-s", until_seq=3, lines=[staged_line("My editor is helix.", "editor")])
    waiting = inbox.stage(root, session="sess-t", until_seq=4, lines=[staged_line("I prefer tea.", "tea")])
    inbox.claim(waiting)
    inbox.stage(root, session="sess-u", until_seq=5, lines=["{not json"])
    status = svc.extractor_status(data=svc.ExtractorStatusInput(), caller=CALLER)
    assert (status.queue.inbox_files, status.queue.claimed_files, status.counts.failures) == (2, 1, 0)
    svc.extractor_drain(data=svc.DrainInput(), caller=CALLER)
    status = svc.extractor_status(data=svc.ExtractorStatusInput(), caller=CALLER)
    assert (status.queue.inbox_files, status.queue.claimed_files, status.counts.failures) == (0, 0, 1)
    assert status.enabled is True and status.provider == "local"


def test_the_failure_list_shows_newest_first_with_stage_source_and_content(ws, home):
    root = home / "memory"
    for session in ("sess-a", "sess-b"):
        inbox.stage(root, session=session, until_seq=2, lines=["{not json"])
        svc.extractor_drain(data=svc.DrainInput(), caller=CALLER)
    listed = svc.extractor_failure_list(data=svc.FailureListInput(), caller=CALLER)
    assert listed.total == 2
    assert [f.source.session_id for f in listed.failures] == ["sess-b", "sess-a"]
    first = listed.failures[0]
    assert first.stage == "parse" and first.content == "{not json\n" and first.source.file.startswith("_inbox/sess-b/")


def test_replaying_a_dead_letter_drains_it_and_removes_it_and_a_second_replay_finds_nothing(ws, home, tmp_path):
    root = home / "memory"
    elsewhere = tmp_path / "other"
    (elsewhere / ".git").mkdir(parents=True)
    # A workspace this machine has never opened: the drain cannot tell where its memory lives yet.
    other = create_identity(elsewhere)
    inbox.stage(root, session="sess-s", until_seq=3, lines=[
        staged_line("My editor is helix.", "editor"),
        staged_line("Our CI runs nightly.", "ci", ws_id=other.id, scope="workspace", kind="project")])
    [name] = svc.extractor_drain(data=svc.DrainInput(), caller=CALLER).failures
    assert svc.extractor_failure_get(name=name).stage == "resolve"

    resolve_workspace(None, Caller(origin=Origin.CLI, cwd=elsewhere), create=True)  # opened here: known again
    replayed = svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=CALLER)
    assert replayed.replayed is True and replayed.stage == "resolve"
    assert [(c.op, c.applied) for c in replayed.drain.candidates] == [("add", False), ("add", True)]
    assert (workspace_root(elsewhere) / "project_ci.md").is_file()
    assert Decision.objects.count() == 2
    assert svc.extractor_failure_list(data=svc.FailureListInput(), caller=CALLER).total == 0
    with pytest.raises(NotFound):
        svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=CALLER)


def test_a_replay_that_fails_again_leaves_a_new_dead_letter(ws, home):
    root = home / "memory"
    inbox.stage(root, session="sess-s", until_seq=3, lines=["{not json"])
    [name] = svc.extractor_drain(data=svc.DrainInput(), caller=CALLER).failures
    replayed = svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=CALLER)
    [again] = replayed.drain.failures
    assert again != name and svc.extractor_failure_get(name=again).content == "{not json\n"


# ----- replay of every dead letter of a session ----------------------------------------------------------------


def replay_session(session: str) -> svc.ReplayResult:
    return svc.extractor_replay(data=svc.ReplayInput.parse({"session_id": session}), caller=CALLER)


def test_a_session_replay_replays_each_of_its_dead_letters_oldest_first_and_leaves_another_sessions_alone(ws, home):
    root = home / "memory"
    later = dead_letter(root, "sess-a", 30, attribute="shell", text="My shell is fish.")
    other = dead_letter(root, "sess-b", 20, attribute="tea", text="I prefer tea.")
    first = dead_letter(root, "sess-a", 10)
    result = replay_session("sess-a")
    assert (result.session_id, result.replayed, result.failure, result.stage, result.drain) == (
        "sess-a", True, None, None, None)
    assert [(r.failure, r.stage, r.replayed, r.error) for r in result.replays] == [
        (first, "submit", True, None), (later, "submit", True, None)]
    assert [[(c.op, c.applied, c.target_filename) for c in r.drain.candidates] for r in result.replays] == [
        [("add", True, "user_editor.md")], [("add", True, "user_shell.md")]]
    assert (root / "user_editor.md").is_file() and (root / "user_shell.md").is_file()
    # The other session's dead letter is neither replayed nor removed.
    assert inbox.failure_names(root) == [other] and not (root / "user_tea.md").exists()
    assert {d.session_id for d in Decision.objects.all()} == {"sess-a"}


def test_a_session_replay_returns_the_earlier_decision_of_a_candidate_decided_before(ws, home, tmp_path):
    root = home / "memory"
    elsewhere = tmp_path / "other"
    (elsewhere / ".git").mkdir(parents=True)
    other = create_identity(elsewhere)  # a workspace this machine has not opened: its candidate cannot resolve
    inbox.stage(root, session="sess-s", until_seq=3, lines=[
        staged_line("My editor is helix.", "editor"),
        staged_line("Our CI runs nightly.", "ci", ws_id=other.id, scope="workspace", kind="project")])
    drained = svc.extractor_drain(data=svc.DrainInput(), caller=CALLER)
    [name] = drained.failures
    [earlier] = [c.decision_id for c in drained.candidates]

    resolve_workspace(None, Caller(origin=Origin.CLI, cwd=elsewhere), create=True)
    result = replay_session("sess-s")
    [replay] = result.replays
    assert (replay.failure, replay.stage, replay.replayed) == (name, "resolve", True)
    assert [(c.op, c.applied) for c in replay.drain.candidates] == [("add", False), ("add", True)]
    assert replay.drain.candidates[0].decision_id == earlier
    assert Decision.objects.count() == 2
    # Nothing is left to replay: a second session replay is the not-found error, and decides nothing.
    with pytest.raises(NotFound) as caught:
        replay_session("sess-s")
    assert caught.value.details == {"session_id": "sess-s", "reason": "no_failures"}
    assert Decision.objects.count() == 2


def test_a_dead_letter_that_cannot_be_replayed_is_reported_and_the_rest_still_run(ws, home):
    root = home / "memory"
    gone = dead_letter(root, "sess-a", 10, stage="provider")  # a run's failure whose turns are not in the ledger
    empty = dead_letter(root, "sess-a", 20, stage="parse", content="\n")  # holds no candidate at all
    good = dead_letter(root, "sess-a", 30)
    result = replay_session("sess-a")
    assert result.replayed is False
    assert [(r.failure, r.stage, r.replayed) for r in result.replays] == [
        (gone, "provider", False), (empty, "parse", False), (good, "submit", True)]
    assert (result.replays[0].error.code, result.replays[0].error.details["reason"]) == (
        "memory.not_found", "turns_gone")
    assert result.replays[1].error.code == "memory.validation" and result.replays[1].drain is None
    # Each error is the one a replay by id returns, and the records that did not replay are kept for later.
    for name, error in ((gone, result.replays[0].error), (empty, result.replays[1].error)):
        with pytest.raises(CompozyError) as by_id:
            svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=CALLER)
        assert by_id.value.to_dict() == error.model_dump()
    assert inbox.failure_names(root) == [gone, empty]
    assert (root / "user_editor.md").is_file()


def test_the_cli_prints_a_partial_session_replay_and_exits_9_so_a_script_can_tell(cli, home):
    root = home / "memory"
    gone = dead_letter(root, "sess-c", 10, stage="provider")  # its turns are not in the ledger: it cannot replay
    dead_letter(root, "sess-c", 20)
    partial = cli("memory", "extractor", "replay", "--session", "sess-c", "-o", "json")
    assert partial.code == 9, partial.stderr
    assert partial.json["replayed"] is False and [r["replayed"] for r in partial.json["replays"]] == [False, True]
    again = cli("memory", "extractor", "replay", "--session", "sess-c")
    assert again.code == 9 and "session sess-c: 0 of 1 failures replayed" in again.stdout
    assert inbox.failure_names(root) == [gone]
    dead_letter(root, "sess-d", 30, attribute="shell", text="My shell is fish.")
    whole = cli("memory", "extractor", "replay", "--session", "sess-d")
    assert whole.code == 0, whole.stdout + whole.stderr
    assert "session sess-d: 1 of 1 failures replayed" in whole.stdout


def test_a_dead_letter_that_fails_again_is_replayed_once_by_a_session_replay(ws, home):
    root = home / "memory"
    name = dead_letter(root, "sess-a", 10, stage="parse", content="{not json\n")
    result = replay_session("sess-a")
    [replay] = result.replays
    [again] = replay.drain.failures
    assert replay.replayed is True and again != name
    # The new record is the same session's, yet the call took its list before replaying: it stays for next time.
    assert inbox.failure_names(root) == [again] and svc.extractor_failure_get(name=again).source.session_id == "sess-a"


@pytest.mark.parametrize("fields", [{}, {"failure": "20260102T120000000000Z-x.json", "session_id": "sess-a"}])
def test_a_replay_names_exactly_one_of_a_failure_and_a_session(fields):
    with pytest.raises(ValidationError) as caught:
        svc.ReplayInput.parse(fields)
    assert caught.value.code == "memory.validation"
    assert caught.value.details == {"fields": ["failure", "session_id"], "reason": "exactly_one"}


def test_a_session_without_dead_letters_is_not_found_even_when_another_session_has_some(ws, home):
    dead_letter(home / "memory", "sess-b", 10)
    with pytest.raises(NotFound) as caught:
        replay_session("sess-a")
    assert caught.value.code == "memory.not_found" and caught.value.details["reason"] == "no_failures"
    assert len(inbox.failure_names(home / "memory")) == 1


def test_a_replay_by_id_keeps_its_fields_and_lists_itself_as_its_one_replay(ws, home):
    name = dead_letter(home / "memory", "sess-a", 10)
    result = svc.extractor_replay(data=svc.ReplayInput(failure=name), caller=CALLER)
    assert (result.failure, result.stage, result.replayed, result.session_id) == (name, "submit", True, None)
    assert [(c.op, c.applied) for c in result.drain.candidates] == [("add", True)]
    assert [(r.failure, r.drain) for r in result.replays] == [(name, result.drain)]


def test_the_failures_by_session_count_every_dead_letter_not_only_a_page_of_them(ws, home):
    root = home / "memory"
    for minute in range(3):
        dead_letter(root, "sess-a", 10 + minute)
    dead_letter(root, "sess-b", 5)
    listed = svc.extractor_failure_sessions(data=svc.FailureSessionsInput(), caller=CALLER)
    assert [(s.session_id, s.failures, s.oldest, s.newest) for s in listed.sessions] == [
        ("sess-a", 3, "2026-01-02T12:10:00Z", "2026-01-02T12:12:00Z"),
        ("sess-b", 1, "2026-01-02T12:05:00Z", "2026-01-02T12:05:00Z")]
    assert svc.extractor_failure_list(data=svc.FailureListInput(limit=1), caller=CALLER).total == 4
