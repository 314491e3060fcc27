"""Contradictions as an agent meets them over MCP (the official `mcp` client against `compozy mcp`): a newer fact
about the same subject and slot supersedes the older memory, and the same fact about another subject is a memory
of its own (issue 27 item 5, issue 24 item 14)."""

from __future__ import annotations

import pytest

from tests.helpers import workspace_root
from tests.surfaces.helpers import session


def propose(name: str, description: str, content: str) -> tuple[str, dict]:
    # trace: these tests read why the controller decided (an agent's answer leaves the rule trace out otherwise).
    return ("compozy__memory_propose", {"operation": "add", "type": "project", "name": name,
                                        "description": description, "content": content, "trace": True})


@pytest.fixture
def memories(cli):
    return workspace_root(cli.cwd)


def test_a_newer_fact_about_the_same_subject_and_slot_supersedes_the_older_memory(cli, memories):
    _tools, answers = session(cli, calls=[
        propose("Production host", "Where production is deployed", "Production deploys to Fly.io."),
        propose("Production move", "Production moved to Render", "Production moved from Fly.io to Render."),
        ("compozy__memory_search", {"query": "where do we deploy production?"}),
    ])
    (err1, first), (err2, second), (err3, found) = answers
    assert not (err1 or err2 or err3), (first, second, found)
    first, second = first["decision"], second["decision"]
    assert (second["op"], second["target_filename"]) == ("update", first["target_filename"]), second
    assert [e["name"] for e in second["rule_trace"]][-1] == "fact_slot"
    files = sorted(p.name for p in memories.glob("project_*.md"))
    assert files == [first["target_filename"]]
    text = (memories / files[0]).read_text()
    assert "Render" in text and "deploys to Fly.io" not in text
    assert "Production moved to Render" in (memories / "MEMORY.md").read_text()  # the index says the new fact
    top = found["results"][0]
    assert top["memory"]["description"] == "Production moved to Render" and "Render" in top["snippet"]
    assert all("deploys to Fly.io" not in str(result) for result in found["results"])


def test_the_same_fact_about_another_subject_is_added_beside_it(cli, memories):
    _tools, answers = session(cli, calls=[
        propose("Staging database", "Staging database port", "The staging database listens on port 6543."),
        propose("Staging backups", "Staging database backups",
                "The staging database backups run nightly and listen on port 6543."),
        propose("Test database", "Test database port", "The test database listens on port 6543."),
    ])
    assert [error for error, _ in answers] == [False, False, False], answers
    assert answers[2][1]["decision"]["op"] == "add", answers[2][1]
    texts = [p.read_text() for p in memories.glob("project_*.md")]
    assert sum("staging database listens on port 6543" in t for t in texts) == 1
    assert sum("test database listens on port 6543" in t for t in texts) == 1


def test_a_batch_that_changes_the_fact_in_the_body_can_change_the_description_and_the_index_line(cli, memories):
    _tools, answers = session(cli, calls=[
        propose("Production host", "Production deploys to Fly.io", "Production deploys to Fly.io."),
        ("compozy__memory_propose", {
            "filename": "project_production_host.md", "description": "Production deploys to Render",
            "operations": [{"action": "replace", "old_text": "Fly.io", "content": "Render"}]}),
    ])
    assert [error for error, _ in answers] == [False, False], answers
    assert answers[1][1]["decision"]["op"] == "update"
    text = (memories / "project_production_host.md").read_text()
    assert "description: Production deploys to Render" in text and "Fly.io" not in text
    index = (memories / "MEMORY.md").read_text()
    assert "Production deploys to Render" in index and "Fly.io" not in index


def test_the_propose_tool_tells_an_agent_that_a_batch_can_change_the_description(cli):
    tools, _answers = session(cli, calls=[])
    [propose_tool] = [tool for tool in tools if tool.name == "compozy__memory_propose"]
    described = propose_tool.input_schema["properties"]["description"]["description"]
    assert "batch" in described and "index" in described
