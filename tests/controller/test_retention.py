"""Decision retention: old applied decisions are pruned, except each existing file's latest ones and every
unapplied decision; a pruned decision is reported as pruned, never as unknown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from memory.controller.decision_log import persist_decision
from memory.domain.enums import EventOp
from memory.domain.errors import NotFound
from memory.domain.models import utc_now
from memory.models import Decision, Event, PrunedDecision
from memory.services.decisions import PruneInput, decision_prune
from tests import helpers as h
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db


def age(decision_ids: list[str], days: float) -> None:
    """Move decisions into the past, keeping their order (each moves by the same amount)."""
    with connection.cursor() as cursor:
        for decision_id in decision_ids:
            decision = Decision.objects.get(id=decision_id)
            decided = decision.decided_at - timedelta(days=days)
            applied = decision.applied_at - timedelta(days=days) if decision.applied_at else None
            cursor.execute("UPDATE memory_decisions SET decided_at = %s, applied_at = %s WHERE id = %s",
                           [connection.ops.adapt_datetimefield_value(decided),
                            connection.ops.adapt_datetimefield_value(applied) if applied else None, decision_id])


def prune(ws, dry_run: bool = False) -> dict:
    return decision_prune(data=PruneInput(dry_run=dry_run), caller=h.caller(ws)).to_json()


@pytest.fixture
def history(home, workspace_dir):
    """Three files' histories, all applied 100 days ago: one updated twice (still there), one deleted, one whose
    latest decision is a noop; plus an old unapplied decision and a recent one."""
    ws = workspace_dir
    kept_file = [h.write(ws, name="Build Tool", content=f"The project builds with tool number {n}.")["decision"]["id"]
                 for n in (1, 2, 3)]
    gone = [h.write(ws, name="Old Runner", content="The old runner used shell scripts only.")["decision"]["id"],
            h.delete(ws, filename="project_old_runner.md")["decision"]["id"]]
    twin_add = h.write(ws, name="Lint Setup", content="Ruff checks style on every commit.")["decision"]["id"]
    twin_noop = h.write(ws, name="Lint Setup Again", content="Ruff checks  style on every commit.")["decision"]["id"]
    assert Decision.objects.get(id=twin_noop).op == "noop"
    age(kept_file + gone + [twin_add, twin_noop], days=100)
    pending = Decision.objects.get(id=kept_file[0])
    pending.pk = pending.id = "dec_" + "a" * 24
    pending.idempotency_key = "pending-" + "0" * 56
    pending.target_filename = "project_pending.md"
    pending.decided_at = utc_now() - timedelta(days=200)
    pending.applied_at = None
    persist_decision(pending)
    recent = h.write(ws, name="Fresh Note", content="Deploys happen on Tuesdays after standup.")["decision"]["id"]
    return {"ws": ws, "kept_file": kept_file, "gone": gone, "twin_add": twin_add, "twin_noop": twin_noop,
            "pending": pending.id, "recent": recent}


def test_retention_keeps_each_existing_files_latest_decision_and_every_unapplied_one(history):
    result = prune(history["ws"])

    remaining = set(Decision.objects.values_list("id", flat=True))
    pruned = set(history["kept_file"][:2] + history["gone"])
    assert remaining.isdisjoint(pruned)
    assert history["kept_file"][2] in remaining  # the existing file's latest decision
    assert {history["twin_noop"], history["twin_add"]} <= remaining  # latest decision and latest mutation
    assert history["pending"] in remaining  # unapplied, however old
    assert history["recent"] in remaining
    assert set(PrunedDecision.objects.values_list("id", flat=True)) == pruned

    root_key = Decision.objects.get(id=history["recent"]).root_key
    assert result["pruned"] == 4
    assert [(r["root_key"], r["pruned"]) for r in result["roots"]] == [(root_key, 4)]
    event = Event.objects.get(op=EventOp.DECISIONS_PRUNED.value)
    assert event.metadata["roots"] == {root_key: 4}
    assert event.workspace_id == root_key.split(":")[1]


def test_the_controller_still_finds_what_it_needs_after_pruning(history):
    ws = history["ws"]
    prune(ws)
    path = workspace_root(ws) / "project_build_tool.md"
    before = path.read_text()
    # A hand edit's prior content comes from the kept latest decision.
    path.write_text(before.replace("tool number 3", "tool number 4"))
    report = h.reindex(ws)
    (edit_id,) = [d for root in report["roots"] for d in root["external_decisions"]]
    edit = Decision.objects.get(id=edit_id)
    assert edit.prior_content == before
    # And a revert of the kept decision still checks the file against it.
    reverted = h.revert(ws, edit.id)
    assert reverted["reverted"] is True and path.read_text() == before


def test_a_pruned_decision_answers_not_found_saying_retention_pruned_it(history):
    ws = history["ws"]
    prune(ws)
    for call in (lambda: h.revert(ws, history["kept_file"][0]), lambda: h.decision_show(ws, history["kept_file"][0])):
        with pytest.raises(NotFound) as raised:
            call()
        assert "pruned by retention" in raised.value.message
        assert raised.value.details["reason"] == "pruned_by_retention"
    with pytest.raises(NotFound) as unknown:
        h.revert(ws, "dec_" + "b" * 24)
    assert "pruned" not in unknown.value.message


def test_a_dry_run_counts_without_deleting_or_recording(history):
    before = Decision.objects.count()
    result = prune(history["ws"], dry_run=True)
    assert result["dry_run"] is True and result["pruned"] == 4
    assert Decision.objects.count() == before
    assert not PrunedDecision.objects.exists()
    assert not Event.objects.filter(op=EventOp.DECISIONS_PRUNED.value).exists()


def test_the_retention_period_comes_from_configuration(history, monkeypatch):
    monkeypatch.setenv("COMPOZY_MEMORY__DECISIONS__PRUNE_AFTER_APPLIED_DAYS", "150")
    assert prune(history["ws"])["pruned"] == 0
    monkeypatch.setenv("COMPOZY_MEMORY__DECISIONS__PRUNE_AFTER_APPLIED_DAYS", "30")
    assert prune(history["ws"])["pruned"] == 4
