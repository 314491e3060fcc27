"""The operator's verbs over the extractor: drain, status, the dead letters and their replay."""

from __future__ import annotations

import pytest

from memory.controller import inbox
from memory.domain.enums import Origin
from memory.domain.errors import NotFound
from memory.domain.extraction import ExtractedMemory, RunSource, StagedCandidate
from memory.models import Decision
from memory.services import extractor as svc
from memory.services.inputs import Caller
from memory.services.resolution import resolve_workspace
from memory.store.workspace import create_identity

pytestmark = pytest.mark.django_db
CALLER = Caller(origin=Origin.CLI)


@pytest.fixture
def ws(home, workspace_dir):
    return resolve_workspace(None, Caller(origin=Origin.CLI, cwd=workspace_dir), create=True)


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
    assert (elsewhere / ".compozy" / "memory" / "project_ci.md").is_file()
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
