"""A workspace holding fewer memories than a list's pool, in a home whose catalog holds other workspaces too: the
ranking over every root (over-fetched, then filtered to the visible roots) can never fill the list, so it was
always followed by the ranking within the roots. Recall now asks the one within the roots at once (`scoped`), and
must get exactly the rows and scores the two statements gave."""

from __future__ import annotations

import random

import pytest
from django.db import connection

from memory.catalog import fts
from memory.recall import pipeline
from tests import helpers as h
from tests.recall import helpers as r
from tests.recall.helpers import RecordingCursor

pytestmark = pytest.mark.django_db

WORDS = ["harbour", "lantern", "granite", "meadow", "quartz", "falcon", "river", "stone", "cloud", "ember"]
QUESTION = "harbour lantern granite falcon"


def fill(workspace, count: int, seed: int) -> None:
    rng = random.Random(seed)
    for index in range(count):
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) + "."
        r.put(h.workspace_root(workspace), f"project_note_{index:03d}.md", name=f"Note {index}", body=body)
    h.reindex(workspace)


@pytest.fixture
def two_workspaces(home, tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    for path in (small, large):
        path.mkdir()
        (path / ".git").mkdir()
        r.ensure_workspace(path)
    fill(small, 12, seed=3)
    fill(large, 400, seed=5)
    return small, large


def plan_of(workspace, monkeypatch) -> pipeline.RecallPlan:
    plans: list[pipeline.RecallPlan] = []
    planned = pipeline.plan_recall
    monkeypatch.setattr(pipeline, "plan_recall", lambda *args, **kwargs: plans.append(planned(*args, **kwargs))
                        or plans[-1])
    result = r.search(workspace, QUESTION)
    assert result["results"]
    return plans[-1]


def ranked(plan: pipeline.RecallPlan, table: str, *, scoped: bool) -> tuple[list[tuple], list[str]]:
    recall = fts.recall_unicode if table == "unicode" else fts.recall_trigram
    with connection.cursor() as raw:
        cursor = RecordingCursor(raw)
        rows = recall(cursor, expression=plan.expression if table == "unicode" else '"harbour" OR "falcon"',
                      root_keys=plan.root_keys, include_system=False, limit=plan.pool, owners=plan.visible,
                      scoped=scoped)
    return [tuple(row[:3]) for row in rows], cursor.statements


def test_a_small_workspace_is_ranked_within_its_roots_at_once_with_the_same_rows(two_workspaces, monkeypatch):
    small, large = two_workspaces
    plan = plan_of(small, monkeypatch)
    assert plan.visible.memories == 12 < plan.pool and plan.scoped
    for table in ("unicode", "trigram"):
        at_once, statements = ranked(plan, table, scoped=True)
        # Over every root first: 400 other memories match, so the over-fetched hits are full and hold too few of
        # this workspace's; the ranking within the roots follows.
        in_two, before = ranked(plan, table, scoped=False)
        assert at_once == in_two and len(at_once) == 12
        within = [statement for statement in statements if "e.root_key IN" in statement and "MATCH" in statement]
        assert len(within) == 1 and not any(statement.startswith("SELECT rowid") for statement in statements)
        assert any(statement.startswith("SELECT rowid") for statement in before)
        assert any("e.root_key IN" in statement and "MATCH" in statement for statement in before)
    # The large workspace fills the pool from the ranking over every root: not scoped.
    assert not plan_of(large, monkeypatch).scoped
