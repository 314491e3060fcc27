"""A conflict is never memory: a memory file holding git's merge-conflict markers is refused everywhere, and its
previous version stays recalled until the conflict is resolved."""

from __future__ import annotations

import pytest

from memory.domain.document import conflict_marker_line
from tests.helpers import workspace_root

HUNK = """<<<<<<< HEAD
The staging database listens on port 5433.
=======
The staging database listens on port 6543.
>>>>>>> feature"""
CONFLICTED = "---\nname: Staging database\ndescription: where it listens\n---\n\n" + HUNK + "\n"


def test_only_a_start_separator_and_end_in_order_are_a_conflict():
    assert conflict_marker_line(CONFLICTED) == 6
    assert conflict_marker_line("Title\n=======\n\nA setext heading is no conflict.\n") is None
    assert conflict_marker_line("=======\n>>>>>>> x\n<<<<<<< y\n") is None
    assert conflict_marker_line("<<<<<<< ours\nA\n||||||| base\nB\n=======\nC\n>>>>>>> theirs") == 1


@pytest.fixture
def conflicted(cli, workspace_dir):
    assert cli("memory", "write", "--type", "reference", "--name", "Staging database", "--description",
               "where the staging database listens", "--content", "The staging database listens on port 5433.",
               "--scope", "workspace").code == 0
    path = workspace_root(workspace_dir) / "reference_staging_database.md"
    # What git leaves after both machines changed the body of the file Compozy wrote.
    path.write_text(path.read_text().replace("The staging database listens on port 5433.", HUNK))
    return path


def test_health_names_the_conflicted_file_and_the_reason_with_the_invalid_files_exit_code(cli, conflicted):
    broken = conflicted.with_name("reference_broken.md")
    broken.write_text("---\nname: [unclosed\n---\nbody\n")
    result = cli("memory", "health", "-o", "json")
    reasons = {item["filename"]: item["reason"] for item in result.json["invalid_files"]}
    assert reasons["reference_staging_database.md"] == "conflict_markers"
    broken.unlink()
    alone = cli("memory", "health", "-o", "json")
    assert alone.code == result.code
    assert alone.json["status"] == result.json["status"] == "degraded"
    assert [item["reason"] for item in alone.json["invalid_files"]] == ["conflict_markers"]


def test_after_reindex_search_and_snapshot_recall_the_previous_version_and_never_the_markers(cli, conflicted):
    assert cli("memory", "reindex", "-o", "json").code == 0
    search = cli("memory", "search", "staging database port", "-o", "json")
    assert "5433" in search.stdout and "6543" not in search.stdout and "<<<<<<<" not in search.stdout
    snapshot = cli("memory", "snapshot", "--query", "staging database port")
    assert "reference_staging_database.md" in snapshot.stdout
    assert "<<<<<<<" not in snapshot.stdout and "6543" not in snapshot.stdout
    rebuilt = cli("memory", "reindex", "--rebuild", "-o", "json")
    assert rebuilt.code == 0
    again = cli("memory", "search", "staging database port", "-o", "json")
    assert "5433" in again.stdout and "6543" not in again.stdout


def test_a_write_over_the_conflicted_file_is_refused_and_the_file_is_kept(cli, conflicted):
    before = conflicted.read_text()
    result = cli("memory", "edit", "reference_staging_database.md", "--content", "Port 7000.", "-o", "json")
    assert result.code != 0
    assert conflicted.read_text() == before


def test_a_memory_written_with_conflict_markers_is_refused_as_input(cli):
    body = "<<<<<<< HEAD\nport 5433\n=======\nport 6543\n>>>>>>> feature"
    result = cli("memory", "write", "--type", "reference", "--name", "Ports", "--description", "d",
                 "--content", body, "-o", "json")
    assert result.code != 0
    assert result.json["details"]["reason"] == "conflict_markers"


def _decisions(cli, filename):
    listed = cli("memory", "decisions", "list", "-o", "json").json["decisions"]
    return [d for d in listed if d["target_filename"] == filename]


@pytest.mark.parametrize(("keep", "kept", "gone"), [("ours", "5433", "6543"), ("theirs", "6543", "5433")])
def test_resolve_keeping_one_side_is_a_decision_that_keeps_the_conflict_as_its_prior(cli, conflicted, keep, kept,
                                                                                     gone):
    before = conflicted.read_text()
    result = cli("memory", "resolve", "reference_staging_database.md", "--keep", keep, "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    (write,) = result.json["writes"]
    assert write["decision"]["op"] == "update" and write["applied"]
    text = conflicted.read_text()
    assert kept in text and gone not in text and "<<<<<<<" not in text
    shown = cli("memory", "decisions", "show", write["decision"]["id"], "-o", "json").json["decision"]
    assert shown["prior_content"] == before
    assert cli("memory", "health", "-o", "json").json["invalid_files"] == []
    search = cli("memory", "search", "staging database port", "-o", "json").stdout
    assert kept in search and gone not in search


def test_resolve_keeping_both_makes_two_memories(cli, conflicted):
    result = cli("memory", "resolve", "reference_staging_database.md", "--keep", "both", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    ops = [(w["decision"]["op"], w["decision"]["target_filename"]) for w in result.json["writes"]]
    assert ops == [("update", "reference_staging_database.md"), ("add", "reference_staging_database_theirs.md")]
    assert "5433" in conflicted.read_text()
    assert "6543" in conflicted.with_name("reference_staging_database_theirs.md").read_text()


def test_resolve_with_an_edit_writes_the_given_body(cli, conflicted):
    result = cli("memory", "resolve", "reference_staging_database.md", "--keep", "edit", "--content",
                 "Staging listens on 5433; the feature branch's 6543 is the replica.", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    assert "the replica" in conflicted.read_text() and "<<<<<<<" not in conflicted.read_text()


def test_resolve_of_a_file_without_conflict_is_refused(cli, conflicted):
    cli("memory", "resolve", "reference_staging_database.md", "--keep", "ours")
    again = cli("memory", "resolve", "reference_staging_database.md", "--keep", "ours", "-o", "json")
    assert again.code != 0 and again.json["details"]["reason"] == "not_conflicted"
