"""Reads across every workspace this machine knows (`all_workspaces`): the operator's view, the inspector's
default. Each row still names its workspace; an agent never gets this view."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memory.domain.enums import Origin
from memory.domain.errors import NotFound, ScopeInvalid, ValidationError
from memory.services import catalog, decisions, events, memories
from memory.services.inputs import Caller
from tests import helpers as h
from tests.helpers import workspace_root
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db

# The inspector's caller: no directory, so no workspace of its own.
NOWHERE = Caller(origin=Origin.HTTP)


@pytest.fixture
def two(home, workspace_dir, tmp_path) -> dict[str, tuple[Path, str]]:
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)  # a workspace is created only at a git checkout
    h.write(workspace_dir, name="Alpha deploys", content="Alpha deploys from the main branch.")
    h.write(other, name="Beta deploys", content="Beta deploys from tags only.")
    h.write(workspace_dir, name="Shared habit", type="user", content="The operator prefers short answers.")
    return {"alpha": (workspace_dir, r.ensure_workspace(workspace_dir)), "beta": (other, r.ensure_workspace(other))}


def listed(**fields) -> list[tuple[str, str | None]]:
    result = memories.memory_list(data=memories.ListInput.parse({"detail": True, **fields}), caller=NOWHERE)
    return sorted((m["filename"], m["workspace_id"]) for m in result.to_json()["memories"])


def test_a_list_across_workspaces_shows_every_workspace_memory_each_naming_its_workspace(two):
    alpha, beta = two["alpha"][1], two["beta"][1]
    assert listed(all_workspaces=True) == [("project_alpha_deploys.md", alpha), ("project_beta_deploys.md", beta),
                                           ("user_shared_habit.md", None)]
    # Without it, a caller with no workspace of its own sees the global scope only (the CLI's rule, unchanged).
    assert listed() == [("user_shared_habit.md", None)]
    assert listed(workspace=beta) == [("project_beta_deploys.md", beta), ("user_shared_habit.md", None)]
    assert listed(all_workspaces=True, scope="workspace") == [("project_alpha_deploys.md", alpha),
                                                              ("project_beta_deploys.md", beta)]


def test_all_workspaces_is_refused_with_a_workspace_and_to_an_agent(two):
    with pytest.raises(ValidationError) as both:
        listed(all_workspaces=True, workspace=two["alpha"][1])
    assert both.value.details == {"field": "all_workspaces", "reason": "with_workspace"}
    agent = Caller(origin=Origin.TOOL, cwd=two["alpha"][0])
    for service, model in ((memories.memory_list, memories.ListInput), (catalog.health_get, catalog.HealthInput),
                           (decisions.decision_list, decisions.DecisionListInput),
                           (events.event_list, events.EventListInput)):
        with pytest.raises(ScopeInvalid) as refused:
            service(data=model.parse({"all_workspaces": True}), caller=agent)
        assert refused.value.details["reason"] == "operator_only"


def test_health_of_the_whole_home_has_a_row_per_workspace_and_counts_every_root(two):
    (alpha_dir, alpha), (beta_dir, beta) = two["alpha"], two["beta"]
    (workspace_root(beta_dir) / "project_hand_written.md").write_text(
        "---\nname: Hand written\ndescription: Added by hand\ntype: project\nscope: workspace\n---\nBy hand.\n")
    health = catalog.health_get(data=catalog.HealthInput.parse({"all_workspaces": True}), caller=NOWHERE).to_json()
    assert health["all_workspaces"] is True
    rows = {row["id"]: row for row in health["workspaces"]}
    assert set(rows) == {alpha, beta}
    assert (rows[alpha]["status"], rows[alpha]["files"], rows[alpha]["drift_files"]) == ("ok", 1, 0)
    assert (rows[beta]["status"], rows[beta]["files"], rows[beta]["drift_files"]) == ("degraded", 2, 1)
    assert rows[beta]["path"] == str(beta_dir.resolve())
    assert (health["global_files"], health["workspace_files"], health["unindexed_files"]) == (1, 3, 1)
    assert health["status"] == "degraded"
    # One workspace's report has that workspace's row only.
    own = catalog.health_get(data=catalog.HealthInput.parse({}), caller=h.caller(alpha_dir)).to_json()
    assert [row["id"] for row in own["workspaces"]] == [alpha]
    assert (own["all_workspaces"], own["status"], own["workspace_files"]) == (False, "ok", 1)


def test_a_workspace_whose_directory_is_gone_is_reported_missing_not_as_drift(two):
    beta_dir, beta = two["beta"]
    shutil.rmtree(beta_dir)
    health = catalog.health_get(data=catalog.HealthInput.parse({"all_workspaces": True}), caller=NOWHERE).to_json()
    row = next(row for row in health["workspaces"] if row["id"] == beta)
    assert (row["status"], row["files"], row["indexed_files"], row["drift_files"]) == ("missing", 0, 1, 0)
    assert (health["status"], health["orphaned_files"]) == ("ok", 0)
    # Its memories are still listed from the catalog, keyed by its id.
    assert ("project_beta_deploys.md", beta) in listed(all_workspaces=True)


def test_a_decision_is_found_by_its_id_alone_across_workspaces_and_reverted_there(two):
    beta_dir, beta = two["beta"]
    written = h.write(beta_dir, name="Beta runbook", content="Restart the beta queue with make restart.")
    decision_id = written["decision"]["id"]
    lookup = decisions.DecisionIdInput.parse({"decision_id": decision_id, "all_workspaces": True})
    shown = decisions.decision_show(data=lookup, caller=NOWHERE).to_json()["decision"]
    assert (shown["id"], shown["workspace_id"]) == (decision_id, beta)
    with pytest.raises(NotFound):  # the caller's own view (no workspace) never reaches another workspace's
        decisions.decision_show(data=decisions.DecisionIdInput.parse({"decision_id": decision_id}), caller=NOWHERE)
    reverted = decisions.decision_revert(
        data=decisions.RevertInput.parse({"decision_id": decision_id, "all_workspaces": True}), caller=NOWHERE)
    assert (reverted.decision.op, reverted.reverted) == ("delete", True)
    assert not (workspace_root(beta_dir) / "project_beta_runbook.md").exists()


def test_decision_and_event_lists_across_workspaces_hold_both_and_one_workspace_holds_its_own(two):
    alpha, beta = two["alpha"][1], two["beta"][1]

    def decision_workspaces(**fields) -> set[str | None]:
        result = decisions.decision_list(data=decisions.DecisionListInput.parse(fields), caller=NOWHERE).to_json()
        return {d["workspace_id"] for d in result["decisions"]}

    def event_workspaces(**fields) -> set[str | None]:
        result = events.event_list(data=events.EventListInput.parse(fields), caller=NOWHERE).to_json()
        return {e["workspace_id"] for e in result["events"]}

    assert decision_workspaces(all_workspaces=True) == {alpha, beta, None}
    assert decision_workspaces(workspace=alpha) == {alpha, None}
    assert event_workspaces(all_workspaces=True) >= {alpha, beta}
    assert beta not in event_workspaces(workspace=alpha)
    activity = events.event_activity(data=events.ActivityInput.parse({"all_workspaces": True}), caller=NOWHERE)
    assert activity.totals["write"] == 3


def test_a_reindex_of_every_workspace_reads_each_workspace_root(two):
    alpha, beta = two["alpha"][1], two["beta"][1]
    result = catalog.catalog_reindex(data=catalog.ReindexInput.parse({"all_workspaces": True}), caller=NOWHERE)
    roots = {root.root_key: root.files for root in result.roots}
    assert roots == {"global": 1, f"workspace:{alpha}": 1, f"workspace:{beta}": 1}
