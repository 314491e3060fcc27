"""Contradictions as a person meets them on the CLI (issue 27 item 5): a newer fact about the same subject and slot
supersedes the older memory instead of being written beside it, so search finds only the newer statement; and an
edit that changes the fact in the body changes the description, so the index does not keep saying the old one."""

from __future__ import annotations

from tests.helpers import workspace_root


def write(cli, name: str, description: str, content: str) -> dict:
    result = cli("memory", "write", "--type", "project", "--name", name, "--description", description,
                 "--content", content, "-o", "json")
    assert result.code == 0, result.stderr
    return result.json["decision"]


def test_a_newer_fact_written_on_the_cli_supersedes_the_older_and_search_finds_the_newer(cli):
    memories = workspace_root(cli.cwd)
    first = write(cli, "Production host", "Where production is deployed", "Production deploys to Fly.io.")
    second = write(cli, "Production move", "Production moved to Render", "Production moved from Fly.io to Render.")
    assert (second["op"], second["target_filename"]) == ("update", first["target_filename"]), second
    assert sorted(p.name for p in memories.glob("project_*.md")) == [first["target_filename"]]
    found = cli("memory", "search", "where do we deploy production?", "-o", "json")
    assert found.code == 0, found.stderr
    results = found.json["results"]
    assert results and "Render" in results[0]["snippet"], results
    assert all("deploys to Fly.io" not in str(result) for result in results)


def test_an_edit_that_changes_the_fact_changes_the_description_and_the_index_line(cli):
    memories = workspace_root(cli.cwd)
    write(cli, "Production host", "Production deploys to Fly.io", "Production deploys to Fly.io.")
    edited = cli("memory", "edit", "project_production_host.md", "--content", "Production deploys to Render.",
                 "--description", "Production deploys to Render")
    assert edited.code == 0, edited.stderr
    text = (memories / "project_production_host.md").read_text()
    assert "description: Production deploys to Render" in text and "Fly.io" not in text
    index = (memories / "MEMORY.md").read_text()
    assert "Production deploys to Render" in index and "Fly.io" not in index
    shown = cli("memory", "list", "-o", "json").json["memories"]
    assert [m["description"] for m in shown if m["filename"] == "project_production_host.md"] == [
        "Production deploys to Render"]
