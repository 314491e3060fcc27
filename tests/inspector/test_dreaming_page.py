"""The inspector's Dreaming page: each gate's state and what it waits for, the runs with their candidates,
scores, artifact and decision, and the Trigger and Retry buttons (POST, CSRF-protected, origin http)."""

from __future__ import annotations

import re

import pytest

from memory.models import Consolidation
from tests.background.dreaming_helpers import ready, workspace_id
from tests.inspector.helpers import csrf_token_of, page_text, signed_in_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(home, workspace_dir):
    return signed_in_client(enforce_csrf_checks=True)


def test_the_page_shows_each_gate_and_what_it_waits_for(browser, workspace_dir):
    from tests.background.dreaming_helpers import write_memories

    write_memories(workspace_dir, 2)
    text = page_text(browser.get("/inspector/dreaming/"))  # one workspace known: it is chosen
    for gate in ("disabled", "time", "sessions", "lock", "signal"):
        assert f'<th scope="row">{gate}</th>' in text
    assert "3 more completed session(s)" in text and "5 more such candidate(s)" in text
    assert "No runs yet." in text


def test_the_trigger_button_runs_dreaming_and_the_run_page_shows_candidates_artifact_and_decision(
        browser, workspace_dir):
    files = ready(workspace_dir)
    page = page_text(browser.get("/inspector/dreaming/"))
    response = browser.post("/inspector/dreaming/trigger", {"workspace": workspace_id(workspace_dir),
                                                           "csrfmiddlewaretoken": csrf_token_of(page)})
    assert response.status_code == 302
    run = Consolidation.objects.get()
    assert run.actor == "http" and run.status == "completed"
    detail = page_text(browser.get(response.headers["Location"]))
    for filename in files:
        assert f"<code>{filename}</code>" in detail
    assert "0.930" in detail  # each candidate's score
    assert run.artifact in detail and "Dreaming run " + run.id in detail  # the artifact's text
    # Decision ids are unique: the link needs no workspace.
    assert re.search(r'<a href="/inspector/decisions/dec_[0-9a-f]{24}">add project_dreaming_synthesis', detail)
    listing = page_text(browser.get("/inspector/dreaming/"))
    assert run.id in listing and "Every gate passes" not in listing


def test_a_blocked_trigger_names_the_gate(browser, workspace_dir):
    ready(workspace_dir, count=6)
    page = page_text(browser.get("/inspector/dreaming/"))
    token = csrf_token_of(page)
    assert browser.post("/inspector/dreaming/trigger", {"workspace": workspace_id(workspace_dir),
                                                       "csrfmiddlewaretoken": token}).status_code == 302
    blocked = browser.post("/inspector/dreaming/trigger", {"workspace": workspace_id(workspace_dir),
                                                          "csrfmiddlewaretoken": token})
    assert blocked.status_code == 409
    assert "Not triggered: the time gate blocks." in page_text(blocked)


def test_the_trigger_needs_a_csrf_token(browser, workspace_dir):
    ready(workspace_dir)
    assert browser.post("/inspector/dreaming/trigger", {"workspace": workspace_id(workspace_dir)}).status_code == 403
    assert not Consolidation.objects.exists()


def test_a_failed_run_offers_retry(browser, workspace_dir, monkeypatch):
    ready(workspace_dir)
    page = page_text(browser.get("/inspector/dreaming/"))
    monkeypatch.setenv("COMPOZY_FAULT_RAISE", "dream_submit")
    response = browser.post("/inspector/dreaming/trigger", {"workspace": workspace_id(workspace_dir),
                                                           "csrfmiddlewaretoken": csrf_token_of(page)})
    failed = Consolidation.objects.get()
    detail = page_text(browser.get(response.headers["Location"]))
    assert "Failed at step: <code>submit</code>" in detail and "Retry" in detail
    monkeypatch.delenv("COMPOZY_FAULT_RAISE")
    retried = browser.post(f"/inspector/dreaming/{failed.id}/retry", {"workspace": workspace_id(workspace_dir),
                                                                      "csrfmiddlewaretoken": csrf_token_of(detail)})
    assert retried.status_code == 302
    assert Consolidation.objects.get(retry_of=failed.id).status == "completed"
