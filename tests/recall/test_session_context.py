"""Session context in recall: the memories recorded just after a match, in the same session, share its score.

A reply rarely repeats the words of what it answers ("What is your favourite dance style?" → "Contemporary, it is
so expressive"), so the word index alone never finds it. These tests pin what the context may and may not do."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.models import CatalogEntry
from memory.services import memories
from tests import helpers as h
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db

QUESTION = "what is the favourite dance style of Jon?"
ASKED = "Jon, which dance style is your favourite? Mine changes every year."
REPLY = "Contemporary is my top pick, it is so expressive and powerful."
# Words none of the memories above share with QUESTION, so the reply can only come through context.
FILLER = [f"Note {index}: the {word} shipment arrives on pallets." for index, word in
          enumerate(("copper", "timber", "granite", "cotton", "marble", "walnut", "bamboo", "linen"))]


def put_turns(root, turns, *, session, start_minutes=60, names=None):
    """Memories recorded one minute apart, oldest first, in `session` (None: outside any session)."""
    for position, (filename, body) in enumerate(turns):
        name = (names or {}).get(filename, f"Turn {filename}")
        r.put(root, filename, name=name, description="A turn of the chat", body=body, session=session,
              age=timedelta(minutes=start_minutes - position))


def put_filler(root):
    for index, body in enumerate(FILLER):
        r.put(root, f"project_filler_{index}.md", name=f"Filler {index}", description="Logistics", body=body)


def test_the_memory_recorded_after_a_match_in_the_same_session_is_recalled_without_sharing_a_word(ws, memory_root):
    root = memory_root
    put_filler(root)
    put_turns(root, [("project_asked.md", ASKED), ("project_reply.md", REPLY)], session="chat-1")
    h.reindex(ws)
    result = r.search(ws, QUESTION)
    names = r.filenames(result)
    assert names[:2] == ["project_asked.md", "project_reply.md"]
    reply = result["results"][1]
    assert reply["why_recalled"]["unicode"] > 0 and reply["why_recalled"]["trigram"] == 0
    assert not any(name.startswith("project_filler") for name in names)


@pytest.mark.parametrize("reply_session", ["chat-2", None], ids=["another session", "no session"])
def test_a_memory_of_another_session_or_of_none_gains_nothing(ws, reply_session, memory_root):
    root = memory_root
    put_filler(root)
    put_turns(root, [("project_asked.md", ASKED)], session="chat-1")
    put_turns(root, [("project_reply.md", REPLY)], session=reply_session, start_minutes=59)
    h.reindex(ws)
    assert r.filenames(r.search(ws, QUESTION)) == ["project_asked.md"]


def test_the_share_decays_with_distance_and_stops_at_the_window(ws, monkeypatch, memory_root):
    root = memory_root
    turns = [("project_asked.md", ASKED), ("project_next_1.md", REPLY),
             ("project_next_2.md", "Saturday works for me."), ("project_next_3.md", "See you then, bring water.")]
    put_turns(root, turns, session="chat-1")
    h.reindex(ws)
    results = r.search(ws, QUESTION)["results"]
    assert r.filenames({"results": results}) == ["project_asked.md", "project_next_1.md", "project_next_2.md"]
    assert results[1]["score"] > results[2]["score"]

    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__CONTEXT__WINDOW", "3")
    assert r.filenames(r.search(ws, QUESTION))[3:] == ["project_next_3.md"]
    monkeypatch.setenv("COMPOZY_MEMORY__RECALL__CONTEXT__WINDOW", "0")
    assert r.filenames(r.search(ws, QUESTION)) == ["project_asked.md"]


def test_a_follower_is_judged_by_its_own_name_not_by_the_name_of_the_match_before_it(ws, memory_root):
    """Two identical questions, each followed by a reply: the reply whose own name carries a query word (who said
    it) ranks above the other, whatever the names of the questions."""
    root = memory_root
    put_turns(root, [("project_q_a.md", ASKED), ("project_reply_a.md", REPLY)], session="chat-a",
              names={"project_q_a.md": "Gina, turn 1", "project_reply_a.md": "Mark, turn 2"})
    put_turns(root, [("project_q_b.md", ASKED), ("project_reply_b.md", REPLY)], session="chat-b",
              names={"project_q_b.md": "Gina, turn 1", "project_reply_b.md": "Jon, turn 2"})
    h.reindex(ws)
    names = r.filenames(r.search(ws, QUESTION, top_k=10))
    assert names.index("project_reply_b.md") < names.index("project_reply_a.md")


def test_context_never_crosses_a_workspace_even_under_the_same_session_id(home, tmp_path):
    dirs = {}
    for label in ("a", "b"):
        path = tmp_path / f"project-{label}"
        (path / ".git").mkdir(parents=True)
        r.ensure_workspace(path)
        dirs[label] = path
    put_turns(h.workspace_root(dirs["a"]), [("project_asked.md", ASKED), ("project_reply.md", REPLY)],
              session="shared")
    put_turns(h.workspace_root(dirs["b"]), [("project_other.md", "Nothing to see."),
                                            ("project_secret.md", "The vault code is 4711.")], session="shared")
    for path in dirs.values():
        h.reindex(path)
    result = r.search(dirs["a"], QUESTION, top_k=20)
    assert r.filenames(result) == ["project_asked.md", "project_reply.md"]
    assert "4711" not in repr(result)


def test_a_system_file_is_not_brought_in_by_context_unless_include_system(ws, memory_root):
    root = memory_root
    put_turns(root, [("project_asked.md", ASKED)], session="chat-1")
    put_turns(root, [("_system/dreaming/run.md", "Dreaming run notes.")], session="chat-1", start_minutes=59)
    h.reindex(ws, include_system=True)
    assert r.filenames(r.search(ws, QUESTION)) == ["project_asked.md"]
    assert r.filenames(r.search(ws, QUESTION, include_system=True)) == ["project_asked.md",
                                                                         "_system/dreaming/run.md"]


def test_the_catalog_keeps_the_session_a_memory_was_first_recorded_in(ws, memory_root):
    root = memory_root
    r.put(root, "project_first.md", name="First", body="One.", session="chat-1")
    r.put(root, "project_loose.md", name="Loose", body="Two.")
    h.reindex(ws)
    sessions = dict(CatalogEntry.objects.values_list("filename", "origin_session"))
    assert sessions == {"project_first.md": "chat-1", "project_loose.md": ""}


def test_a_write_in_a_session_records_that_session_and_its_follower_is_recalled(ws):
    """Through the controller: the caller's session id goes into provenance, then into the catalog. (Two writes
    in the same second are ordered by filename, so the names here sort in the order they are written.)"""
    written = []
    for name, content in (("Step one: dance question", ASKED), ("Step two: the reply", REPLY)):
        data = memories.WriteInput.parse({"type": "project", "name": name, "description": name, "content": content})
        result = memories.memory_write(data=data, caller=h.caller(ws, session_id="sess-1")).to_json()
        assert result["applied"], result
        written.append(result["decision"]["target_filename"])
    assert dict(CatalogEntry.objects.values_list("filename", "origin_session")) == dict.fromkeys(written, "sess-1")
    assert r.filenames(r.search(ws, QUESTION)) == written


def test_session_facts_kept_per_generation_follow_a_reply_written_after_a_search(ws, memory_root):
    # The successors and headers that session context reads are kept per memory generation: a memory written
    # after a search is seen by the next one, and asking again gives the same answer from what was kept.
    root = memory_root
    put_filler(root)
    put_turns(root, [("project_asked.md", ASKED)], session="chat-1")
    h.reindex(ws)
    assert r.filenames(r.search(ws, QUESTION)) == ["project_asked.md"]
    put_turns(root, [("project_reply.md", REPLY)], session="chat-1", start_minutes=59)
    h.reindex(ws)
    first = r.search(ws, QUESTION)
    assert r.filenames(first) == ["project_asked.md", "project_reply.md"]
    again = r.search(ws, QUESTION)  # (the score's signal part grew: the first search recorded a recall)
    assert [(hit["memory"]["filename"], hit["why_recalled"]["unicode"]) for hit in again["results"]] == [
        (hit["memory"]["filename"], hit["why_recalled"]["unicode"]) for hit in first["results"]]
