"""What a later session is handed: the frozen section within its budget, the index by usefulness, the ledger's own
turns dated with their relative dates resolved, and the same bytes for the same request at one generation."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest

from memory.models import Snapshot
from memory.services import snapshots
from tests import helpers as h
from tests.recall import helpers as r
from tests.sessions import helpers as s

CHARS_PER_TOKEN = 4
pytestmark = pytest.mark.django_db


def _fill(home, ws, count):
    """`count` memories in every root a snapshot can show: global, workspace and both tiers of agent `coder`."""
    roots = [(r.global_root(home), {"scope": "global"}), (h.workspace_root(ws), {"scope": "workspace"}),
             (r.agent_global_root(home, "coder"), {"scope": "agent", "agent": "coder", "agent_tier": "global"}),
             (r.agent_workspace_root(ws, "coder"), {"scope": "agent", "agent": "coder", "agent_tier": "workspace"})]
    for (root, fields), index in itertools.product(roots, range(count)):
        kind = ("feedback", "user", "project", "reference")[index % 4]
        r.put(root, f"{kind}_note_{fields.get('agent_tier', fields['scope'])}_{index:03d}.md",
              name=f"Note {index} about the deploy pipeline", description=f"Deploy pipeline detail number {index}",
              body=f"The deploy pipeline detail {index}: staging runs migrations before the canary. " * 4, **fields)
    h.reindex(ws)


def _turns(ws, session_id, when, lines):
    s.start(ws, session_id)
    s.append(ws, session_id, [{"kind": "user_message", "content": text, "agent_name": speaker, "ts": when,
                               "turn_id": f"{session_id}-{n}"} for n, (speaker, text) in enumerate(lines)])
    s.stop(ws, session_id)


@pytest.mark.parametrize(("scope", "agent"), [(None, None), ("global", None), ("workspace", None),
                                              (None, "coder"), ("agent", "coder")])
@pytest.mark.parametrize("query", [None, "how does the deploy pipeline run migrations"])
def test_the_section_stays_within_its_budget_for_every_scope_and_agent_tier(home, ws, monkeypatch, scope, agent,
                                                                            query):
    monkeypatch.setenv("COMPOZY_MEMORY__SNAPSHOT__BUDGET_TOKENS", "600")
    _fill(home, ws, 40)
    _turns(ws, "earlier", "2023-05-08T13:56:00Z",
           [("Ana", f"The deploy pipeline broke again at step {n}, migrations ran twice.") for n in range(30)])
    fields = {key: value for key, value in {"scope": scope, "agent_name": agent, "query": query}.items() if value}
    if scope == "agent":
        fields["agent_tier"] = "workspace"
    result = r.snapshot(ws, **fields)
    assert len(result["text"]) <= 600 * CHARS_PER_TOKEN, len(result["text"])
    assert result["budget"]["budget_tokens"] == 600 and result["budget"]["tokens"] <= 600
    assert result["budget"]["index_entries_left_out"] > 0  # 40 memories a root cannot all fit in 2,400 characters
    assert "compozy memory search" in result["text"]
    if query:
        assert result["budget"]["by_part"]["recall"] > 0


def test_the_index_lists_feedback_then_user_preferences_then_the_most_recent_not_by_filename(ws, memory_root):
    root = memory_root
    r.put(root, "project_aaa_oldest.md", name="Aaa oldest", body="Old project note.", age=timedelta(days=30))
    r.put(root, "project_bbb_newest.md", name="Bbb newest", body="New project note.", age=timedelta(minutes=1))
    r.put(root, "user_zzz_prefers.md", name="Zzz prefers", body="The user prefers terse answers.",
          age=timedelta(days=40))
    r.put(root, "feedback_zzz_pnpm.md", name="Zzz pnpm", body="Use pnpm only.", age=timedelta(days=50))
    h.reindex(ws)
    text = r.snapshot(ws)["text"]
    order = re.findall(r"\]\(([a-z_]+\.md)\)", text)
    assert order == ["feedback_zzz_pnpm.md", "user_zzz_prefers.md", "project_bbb_newest.md",
                     "project_aaa_oldest.md"]


def test_a_later_question_is_handed_the_dated_turn_with_its_relative_date_resolved(ws):
    _turns(ws, "s1", "2023-05-08T13:56:00Z", [
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "Wow, that's cool! I'm swamped with the kids and work."),
    ])
    _turns(ws, "s2", "2023-07-15T10:00:00Z", [("Melanie", "We went camping last Friday with the kids.")])
    text = s.start(ws, "later", query="When did Caroline go to the LGBTQ support group?")["snapshot"]["text"]
    assert ("[8 May 2023] Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so "
            "powerful.") in text
    camping = s.start(ws, "later-2", query="When did Melanie go camping?")["snapshot"]["text"]
    assert "last Friday (14 July 2023, the Friday before 15 July 2023)" in camping
    logged = r.snapshot_log(ws, "later")["injections"]
    assert {"source": "ledger", "filename": "session:s1#1"} in [
        {"source": e["source"], "filename": e["filename"]} for e in logged]


def test_the_reply_to_a_matching_turn_is_handed_even_when_it_shares_no_word_with_the_question(ws):
    """The answer to a question asked in a session is usually its reply, which need not repeat the question's
    words: a turn said just after a match shares part of its value (session context, as recall ranks memories)."""
    _turns(ws, "s1", "2023-05-08T13:56:00Z", [
        ("Ana", "Which region hosts the staging database now?"),
        ("Ben", "Frankfurt, since the move in March."),
        ("Ana", "Thanks!"),
    ])
    text = s.start(ws, "later", query="Which region hosts the staging database?")["snapshot"]["text"]
    assert "Ben: Frankfurt, since the move in March." in text
    ledger = text[text.index("From earlier sessions"):]
    # The matching question first, its reply next, the reply's own successor (no match, further away) not at all
    # before them.
    assert ledger.index("Ana: Which region") < ledger.index("Ben: Frankfurt")
    assert "Thanks!" not in ledger[:ledger.index("Ben: Frankfurt")]


def test_a_ledger_turn_without_a_speaker_name_says_which_side_said_it(ws):
    s.start(ws, "s1")
    s.append(ws, "s1", [{"kind": "user_message", "content": "Which region hosts the staging database now?",
                         "ts": "2023-05-08T13:56:00Z"},
                        {"kind": "assistant_message", "content": "Frankfurt, since the staging move in March.",
                         "ts": "2023-05-08T13:57:00Z"}])
    s.stop(ws, "s1")
    text = s.start(ws, "later", query="Which region hosts the staging database?")["snapshot"]["text"]
    assert "[8 May 2023] user: Which region hosts the staging database now?" in text
    assert "[8 May 2023] assistant: Frankfurt, since the staging move in March." in text


def test_the_ledger_turns_of_another_workspace_never_reach_a_section(home, ws, tmp_path):
    other = tmp_path / "other-project"
    (other / ".git").mkdir(parents=True)
    r.ensure_workspace(other)
    _turns(other, "elsewhere", "2023-05-08T13:56:00Z", [("Ana", "The zanzibar quokka credentials rotate monthly.")])
    text = s.start(ws, "here", query="zanzibar quokka credentials")["snapshot"]["text"]
    assert "quokka" not in text


def test_the_same_request_at_one_generation_gives_the_same_bytes_twice(ws):
    _turns(ws, "s1", "2023-05-08T13:56:00Z", [("Ana", "We switched the staging database to Postgres 16 yesterday.")])
    first = r.snapshot(ws, query="when did we switch the staging database")
    snapshots._memo.clear()
    # A fresh process with no cache row assembles it again from the same state.
    Snapshot.objects.filter(sha256=first["sha256"]).delete()
    second = r.snapshot(ws, query="when did we switch the staging database")
    assert first["generation"] == second["generation"]
    assert first["text"] == second["text"] and first["sha256"] == second["sha256"]
    assert "(7 May 2023)" in first["text"]


def test_session_append_keeps_the_time_a_client_gives_on_the_cli_and_in_json_lines(cli):
    assert cli("session", "start", "--session", "ts-1").code == 0
    single = cli("session", "append", "ts-1", "--kind", "user_message", "--content", "hello",
                 "--ts", "2023-05-08T13:56:00Z", "-o", "json")
    assert single.code == 0, single.stderr
    line = '{"kind": "user_message", "content": "again", "ts": "2023-05-09T08:00:00+02:00"}'
    assert cli("session", "append", "ts-1", "--jsonl", line, "-o", "json").code == 0
    bad = cli("session", "append", "ts-1", "--kind", "user_message", "--content", "x", "--ts", "last week",
              "-o", "json")
    assert bad.code == 2 and bad.json["code"] == "memory.validation"
    listed = cli("session", "events", "ts-1", "-o", "json").json["events"]
    assert [e["ts"][:19] for e in listed] == ["2023-05-08T13:56:00", "2023-05-09T06:00:00"]
