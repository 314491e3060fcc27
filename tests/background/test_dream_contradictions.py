"""Dreaming consolidates contradictions (issue 27 item 5): a memory whose fact a newer memory of the workspace
states with another value (the pair reached the root by hand, so the controller's supersede rule never saw it) is
deleted by a dreaming run, through the controller with origin dreaming, and the run says which and why; a memory
about another subject is left alone."""

from __future__ import annotations

import pytest

from memory.domain.enums import Origin
from memory.models import Decision
from memory.services import recall
from memory.services.inputs import Caller
from tests import helpers as h
from tests.background.dreaming_helpers import ready, show, trigger

pytestmark = pytest.mark.django_db

RENDER = """---
name: Production on Render
description: Production moved to Render
type: project
scope: workspace
provenance:
  source_actor: file
  created_at: '2099-01-02T00:00:00Z'
  updated_at: '2099-01-02T00:00:00Z'
---
Production moved from Fly.io to Render.
"""


def test_a_dreaming_run_deletes_the_older_of_two_memories_stating_one_fact_and_records_why(home, workspace_dir):
    ws = workspace_dir
    ready(ws)
    host = h.write(ws, name="Production host", description="Where production is deployed",
                   content="Production deploys to Fly.io.")["decision"]["target_filename"]
    staging = h.write(ws, name="Staging host", description="Where staging is deployed",
                      content="Staging deploys to Fly.io.")["decision"]["target_filename"]
    root = h.workspace_root(ws)
    (root / "project_production_on_render.md").write_text(RENDER)  # by hand: no supersede rule ran
    h.reindex(ws)
    assert (root / host).is_file()
    triggered = trigger(ws)
    assert triggered["triggered"] is True, triggered
    shown = show(ws, triggered["dream"]["id"])["dream"]
    assert shown["status"] == "completed", shown
    [entry] = shown["synthesis"]["contradictions"]
    assert (entry["superseded"], entry["by"], entry["old_value"], entry["new_value"]) == (
        host, "project_production_on_render.md", "fly.io", "render"), entry
    assert not (root / host).exists() and (root / staging).is_file()  # another subject is another fact
    decision = Decision.objects.get(id=entry["decision_id"])
    assert (decision.origin, decision.op, decision.target_filename) == ("dreaming", "delete", host)
    caller = Caller(origin=Origin.CLI, cwd=ws)
    found = recall.memory_search(data=recall.SearchInput(query="where do we deploy production?"),
                                 caller=caller).to_json()["results"]
    filenames = [hit["memory"]["filename"] for hit in found]
    # (The memories ready() gave strong recall signals may rank above it: ranking is recall's, not this test's.)
    assert "project_production_on_render.md" in filenames and host not in filenames, filenames
