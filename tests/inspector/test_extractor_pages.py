"""The inspector's extractor pages: status with its queue and counts, the failures each with a replay button that
works, a drain button, and the candidates of one session with the decision each got."""

from __future__ import annotations

import re

import pytest

from compozy.config import load_config
from memory.domain.extraction import ExtractedMemory, RunSource, StagedCandidate
from memory.extractor import inbox
from memory.extractor.drain import drain_inbox
from memory.models import Decision, ExtractorSession
from memory.services import extractor as svc
from tests.inspector.helpers import csrf_token_of, page_text, signed_in_client
from tests.recall import helpers as r
from tests.sessions import helpers as s

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(home, workspace_dir):
    r.ensure_workspace(workspace_dir)
    return signed_in_client()


def line(content: str, attribute: str, session: str = "sess-ui") -> str:
    memory = ExtractedMemory(type="user", scope="global", agent_tier=None, content=content, evidence=[2],
                             entity="user", attribute=attribute)
    return StagedCandidate(source=RunSource(session=session, root_session=session, from_seq=1, until_seq=2),
                           memory=memory).line()


def test_the_extractor_page_shows_the_queue_and_a_drain_button_that_drains(browser, home):
    inbox.stage(home / "memory", session="sess-ui", until_seq=2, lines=[line("My editor is helix.", "editor")])
    page = page_text(browser.get("/inspector/extractor/"))
    assert "1 staged, 0 claimed" in page and "Drain the inbox now" in page
    # Only the button drains: following a link (or a crawler) to the address changes nothing.
    assert browser.get("/inspector/extractor/drain").status_code == 405 and Decision.objects.count() == 0
    drained = browser.post("/inspector/extractor/drain", {"csrfmiddlewaretoken": csrf_token_of(page)})
    assert drained.status_code == 200
    result = page_text(drained)
    assert "1 file drained, 1 candidate" in result and "user_editor.md" in result
    assert Decision.objects.get().origin == "extractor"
    assert "0 staged, 0 claimed" in page_text(browser.get("/inspector/extractor/"))


def test_each_failure_has_a_replay_button_that_replays_it(browser, home):
    root = home / "memory"
    inbox.stage(root, session="sess-ui", until_seq=2, lines=[line("My editor is helix.", "editor"), "{broken"])
    [name] = drain_inbox(load_config()).failures
    page = page_text(browser.get("/inspector/extractor/"))
    assert name in page and "parse" in page and f'action="/inspector/extractor/failures/{name}/replay"' in page
    replayed = browser.post(f"/inspector/extractor/failures/{name}/replay",
                            {"csrfmiddlewaretoken": csrf_token_of(page)})
    assert replayed.status_code == 200
    text = page_text(replayed)
    assert f"Replayed {name}" in text and "failed again" in text  # the broken line is still broken
    assert inbox.failure_names(root) != [name] and len(inbox.failure_names(root)) == 1


def test_a_replay_of_an_unknown_failure_is_a_404_page_with_its_code(browser):
    page = page_text(browser.get("/inspector/extractor/"))
    response = browser.post("/inspector/extractor/failures/20250101T000000000000Z-x.json/replay",
                            {"csrfmiddlewaretoken": csrf_token_of(page)})
    assert response.status_code == 404 and "memory.not_found" in page_text(response)


def test_a_sessions_page_lists_its_candidates_with_the_decision_each_got(browser, home):
    root = home / "memory"
    inbox.stage(root, session="sess-ui", until_seq=2, lines=[line("My editor is helix.", "editor"),
                                                               line("My editor is helix.", "editor ide")])
    inbox.stage(root, session="sess-other", until_seq=2, lines=[line("I prefer tea.", "tea", "sess-other")])
    page = page_text(browser.get("/inspector/extractor/"))
    browser.post("/inspector/extractor/drain", {"csrfmiddlewaretoken": csrf_token_of(page)})
    session = page_text(browser.get("/inspector/extractor/sessions/sess-ui"))
    assert "2 candidates" in session
    assert "user_editor.md" in session and "op-add" in session and "op-noop" in session
    assert "user_tea.md" not in session


def test_every_time_on_the_extractor_pages_is_a_relative_time_element(browser, home, workspace_dir,
                                                                      django_capture_on_commit_callbacks):
    s.start(workspace_dir, "sess-times")
    with django_capture_on_commit_callbacks(execute=True):
        s.append(workspace_dir, "sess-times", [
            {"kind": "user_message", "content": "My editor is helix.", "turn_id": "t1"},
            {"kind": "assistant_message", "content": "Noted.", "turn_id": "t1"}])
    run = svc.extractor_run(session_id="sess-times", run_id=ExtractorSession.objects.get().run_id)
    assert run.outcome == "completed"
    inbox.stage(home / "memory", session="sess-ui", until_seq=2, lines=["{broken"])
    assert drain_inbox(load_config()).failures  # a failure, with the time it was recorded
    for path in ("/inspector/extractor/", "/inspector/extractor/sessions/sess-times"):
        text = page_text(browser.get(path))
        assert "<time datetime=" in text, path
        text = re.sub(r'<time datetime="[^"]+" title="[^"]+">', "<time>", text)
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", text), (path, re.findall(r".{60}\d{4}-\d\d-\d\dT.{20}",
                                                                                   text)[:3])


def test_an_empty_extractor_page_says_what_would_fill_it(browser):
    page = page_text(browser.get("/inspector/extractor/"))
    assert "No session has been extracted yet. A session is read after each answer its agent appends" in page
    assert "No failures. A run whose provider fails" in page and "never" in page


def test_failures_are_listed_by_session_each_with_a_button_that_replays_all_of_that_session(browser, home):
    from tests.extractor.helpers import dead_letter

    root = home / "memory"
    gone = dead_letter(root, "sess-a", 10, stage="provider")  # its turns are not in the ledger: cannot replay
    good = dead_letter(root, "sess-a", 20, attribute="shell", text="My shell is fish.")
    other = dead_letter(root, "sess-b", 30, attribute="tea", text="I prefer tea.")
    page = page_text(browser.get("/inspector/extractor/"))
    assert 'action="/inspector/extractor/sessions/sess-a/replay"' in page
    assert 'aria-label="Replay all 2 failures of session sess-a"' in page
    assert 'aria-label="Replay all 1 failure of session sess-b"' in page
    # Only the button replays: following the address changes nothing.
    assert browser.get("/inspector/extractor/sessions/sess-a/replay").status_code == 405
    assert len(inbox.failure_names(root)) == 3

    replayed = browser.post("/inspector/extractor/sessions/sess-a/replay",
                            {"csrfmiddlewaretoken": csrf_token_of(page)})
    assert replayed.status_code == 200
    text = page_text(replayed)
    assert "Replayed the failures of session sess-a" in text and "1 of 2 failures replayed" in text
    assert text.index(gone) < text.index(good)  # oldest first
    assert "Not replayed:" in text and "memory.not_found" in text and "user_shell.md" in text
    assert Decision.objects.get().session_id == "sess-a" and (root / "user_shell.md").is_file()
    # The one that could not be replayed is kept, and the other session's is left alone.
    assert inbox.failure_names(root) == [gone, other]
    after = page_text(browser.get("/inspector/extractor/"))
    assert 'aria-label="Replay all 1 failure of session sess-a"' in after


def test_a_replay_of_a_session_without_failures_is_a_404_page_with_its_code(browser):
    page = page_text(browser.get("/inspector/extractor/"))
    response = browser.post("/inspector/extractor/sessions/sess-none/replay",
                            {"csrfmiddlewaretoken": csrf_token_of(page)})
    assert response.status_code == 404 and "memory.not_found" in page_text(response)
