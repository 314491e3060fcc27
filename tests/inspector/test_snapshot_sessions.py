"""The Snapshots page lists the sessions that received a snapshot (every workspace by default) and links to each
one's log; with none yet it says how a session gets one."""

from __future__ import annotations

import re

import pytest

from memory.domain.enums import Origin
from memory.domain.errors import ScopeInvalid
from memory.services import snapshots
from memory.services.inputs import Caller
from tests import helpers as h
from tests.inspector.helpers import page_text, signed_in_client, start_session
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db


@pytest.fixture
def two(home, workspace_dir, tmp_path):
    other = tmp_path / "billing"
    (other / ".git").mkdir(parents=True)
    h.write(workspace_dir, name="Alpha deploys", content="Alpha deploys from the main branch.")
    h.write(other, name="Billing retries", content="Invoices retry three times.")
    start_session(workspace_dir, "sess-alpha-1")
    start_session(other, "sess-billing-1")
    start_session(other, "sess-billing-2")
    return {"alpha": r.ensure_workspace(workspace_dir), "billing": r.ensure_workspace(other)}


def rows_of(page: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r'<tr>\s*<td data-label="Session">.*?<code>([^<]+)</code>'
                                                      r'.*?</tr>', page, re.S)}


def test_a_fresh_visit_lists_the_sessions_of_every_workspace_and_links_each_to_its_log(two):
    client = signed_in_client()
    page = page_text(client.get("/inspector/snapshots/"))
    rows = rows_of(page)
    assert set(rows) == {"sess-alpha-1", "sess-billing-1", "sess-billing-2"}
    assert "3 sessions." in page
    link = f'href="?session_id=sess-billing-2&amp;workspace={two["billing"]}"'
    assert link in rows["sess-billing-2"] and ">billing</a>" in rows["sess-billing-2"]
    assert re.search(r'data-label="Memories injected">[1-9]', rows["sess-alpha-1"])

    opened = page_text(client.get(f"/inspector/snapshots/?session_id=sess-billing-2&workspace={two['billing']}"))
    assert "<dd>sess-billing-2</dd>" in opened and "project_billing_retries.md" in opened
    assert 'href="/inspector/snapshots/">All sessions</a>' in opened

    only = rows_of(page_text(client.get(f"/inspector/snapshots/?workspace={two['alpha']}")))
    assert set(only) == {"sess-alpha-1"}


def test_the_list_pages_with_a_cursor_and_is_the_operators_view_only(two, workspace_dir):
    nowhere = Caller(origin=Origin.HTTP)
    first = snapshots.snapshot_list(data=snapshots.SnapshotListInput.parse({"all_workspaces": True, "limit": 2}),
                                    caller=nowhere)
    assert first.page.total == 3 and first.page.has_more
    rest = snapshots.snapshot_list(data=snapshots.SnapshotListInput.parse(
        {"all_workspaces": True, "limit": 2, "cursor": first.page.next_cursor}), caller=nowhere)
    seen = [s.session_id for s in first.sessions + rest.sessions]
    assert sorted(seen) == ["sess-alpha-1", "sess-billing-1", "sess-billing-2"]
    with pytest.raises(ScopeInvalid):
        snapshots.snapshot_list(data=snapshots.SnapshotListInput.parse({"all_workspaces": True}),
                                caller=Caller(origin=Origin.TOOL, cwd=workspace_dir))


def test_with_no_session_yet_the_page_says_how_a_session_gets_a_snapshot(home, workspace_dir):
    r.ensure_workspace(workspace_dir)
    page = page_text(signed_in_client().get("/inspector/snapshots/"))
    assert "0 sessions." in page
    assert "No session has received a snapshot yet." in page and "compozy memory snapshot --session" in page
