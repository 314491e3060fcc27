"""The inspector's Sessions pages over the real services: the list, one session's events with archived rows
greyed out, its snapshot, its checkpoint decisions and its compaction coverage."""

from __future__ import annotations

import math
import re

import pytest

from compozy.config import get_config
from tests import helpers as h
from tests.inspector.helpers import page_text, signed_in_client
from tests.recall import helpers as r
from tests.sessions import helpers as s

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(home, workspace_dir) -> str:
    """A session whose first turn was compacted into the checkpoint; the second turn is still open."""
    ws = r.ensure_workspace(workspace_dir)
    h.write(workspace_dir, name="Queue Host", content="The billing worker runs on the queue host.")
    s.start(workspace_dir, "insp-1", agent_name="coder", context_window=1000)
    s.append(workspace_dir, "insp-1", s.turn("t1", "Migrate the worker zzarchived.", "I migrated it."))
    s.append(workspace_dir, "insp-1", [{"kind": "user_message", "content": "Document it qqlive.", "turn_id": "t2"}])
    threshold = get_config().session.compaction.pressure_threshold
    assert s.usage(workspace_dir, "insp-1", math.ceil(threshold * 1000), turn_id="t2")["compaction"]["archived"] == 3
    return ws


def test_the_sessions_page_lists_this_workspaces_sessions_with_a_link_to_each(compacted):
    page = page_text(signed_in_client().get(f"/inspector/sessions/?workspace={compacted}"))
    assert f'href="/inspector/sessions/insp-1?workspace={compacted}"' in page
    assert re.search(r'<td data-label="Type">user</td>\s*<td data-label="Status">running</td>\s*'
                     r'<td data-label="Agent">coder</td>\s*<td data-label="Events">5</td>\s*'
                     r'<td data-label="Archived">3</td>', page)


def test_a_session_page_greys_out_archived_events_and_shows_snapshot_decisions_and_coverage(compacted,
                                                                                        workspace_dir):
    response = signed_in_client().get(f"/inspector/sessions/insp-1?workspace={compacted}")
    assert response.status_code == 200
    page = page_text(response)
    events_table = page[page.index('id="events-heading"'):page.index('id="coverage-heading"')]
    rows = re.findall(r"<tr( class=\"archived\")?>\s*<td>(\d+)</td>", events_table)
    assert [(bool(archived), int(seq)) for archived, seq in rows] == [
        (True, 1), (True, 2), (True, 3), (False, 4), (False, 5)]
    archived_row = page[page.index('<tr class="archived">'):]
    assert "zzarchived" in archived_row.split("</tr>")[0]
    checkpoint_decision = h.decision_list(workspace_dir, filename="project_checkpoint_summary.md")["decisions"][0]
    # Linked from the coverage table and from the checkpoint decisions (and from what happened, tested below).
    link = f'href="/inspector/decisions/{checkpoint_decision["id"]}?workspace={compacted}"'
    history = page[page.index('id="history-heading"'):page.index('id="snapshot-heading"')]
    assert page.replace(history, "").count(link) == 2 and link in history
    assert "<td>1</td><td>3</td>" in page  # the covered span
    assert "Queue Host" in page  # the snapshot text as the session received it


def test_a_session_page_tells_what_happened_to_the_session_oldest_first(compacted):
    page = page_text(signed_in_client().get(f"/inspector/sessions/insp-1?workspace={compacted}"))
    history = page[page.index('id="history-heading"'):page.index('id="snapshot-heading"')]
    ops = re.findall(r'<td data-label="Op"><code>(memory\.[a-z._]+)</code>', history)
    assert ops[0] == "memory.session.started"
    assert ops.index("memory.session.compaction.covered") < ops.index("memory.session.compaction.archived")
    # The write compaction made, named by its file (line-break opportunities aside) and linked to its decision.
    assert "project_checkpoint_summary.md" in history.replace("<wbr>", "")


def test_a_session_address_without_its_workspace_opens_in_the_workspace_it_ran_in(compacted):
    client = signed_in_client()
    response = client.get("/inspector/sessions/insp-1")
    assert response.status_code == 302 and response["Location"] == f"/inspector/sessions/insp-1?workspace={compacted}"
    assert "zzarchived" in page_text(client.get(response["Location"]))
    assert client.get("/inspector/sessions/no-such-session").status_code == 404


def test_a_session_of_another_workspace_is_not_found_on_the_page(compacted, tmp_path):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    elsewhere = r.ensure_workspace(other)
    response = signed_in_client().get(f"/inspector/sessions/insp-1?workspace={elsewhere}")
    assert response.status_code == 404 and "memory.not_found" in page_text(response)


def test_with_no_workspace_chosen_the_sessions_page_lists_every_workspaces_sessions(compacted, tmp_path):
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    elsewhere = r.ensure_workspace(other)
    s.start(other, "insp-other", agent_name="coder")
    page = page_text(signed_in_client().get("/inspector/sessions/"))
    assert f'href="/inspector/sessions/insp-1?workspace={compacted}"' in page
    assert f'href="/inspector/sessions/insp-other?workspace={elsewhere}"' in page
    # Choosing a workspace narrows the list to it.
    narrowed = page_text(signed_in_client().get(f"/inspector/sessions/?workspace={elsewhere}"))
    assert "insp-other" in narrowed and "insp-1?" not in narrowed
