"""`compozy memory search` and `compozy memory snapshot` through the real console script."""

from __future__ import annotations

import hashlib
import json

from tests.recall.helpers import put


def write(cli, name, description, body, *extra):
    result = cli("memory", "write", "--type", "project", "--name", name, "--description", description,
                 "--content", body, "-o", "json", *extra)
    assert result.code == 0, result.stdout + result.stderr
    return result.json


def seed(cli):
    write(cli, "Runtime Docs", "Where the runtime docs sit",
          "The runtime docs sit in docs/runtime; mkdocs renders them.")
    write(cli, "Grafana Boards", "Latency dashboards", "Grafana charts request latency per region.",
          "--scope", "global")


def test_search_json_has_the_documented_shape(cli):
    seed(cli)
    result = cli("memory", "search", "where do the runtime docs live and how are they built?", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    document = result.json
    assert set(document) >= {"results", "recall"}
    assert set(document["recall"]) == {"blocks", "header"}
    assert document["results"], document
    for item in document["results"]:
        assert set(item) >= {"memory", "score", "snippet", "why_recalled", "shadowed_by"}
        assert set(item["why_recalled"]) == {"unicode", "trigram", "semantic", "token", "recency", "signal"}
        assert isinstance(item["score"], float)
    assert document["results"][0]["memory"]["filename"] == "project_runtime_docs.md"
    assert len(document["recall"]["blocks"]) == len([i for i in document["results"] if i["shadowed_by"] is None])
    assert "Runtime Docs" in document["recall"]["blocks"][0]


def test_search_top_k_and_include_system_flags(cli, memory_root):
    seed(cli)
    for index, word in enumerate(("alpha", "bravo", "charlie")):
        put(memory_root, f"reference_queue_{word}.md", name=f"Queue {word}",
            body=f"The worker queue retries batch {word}{index}.")
    put(memory_root, "_system/dreaming/project_dream_notes.md", name="Dream notes",
        body="Worker queue zanzibar quokka dream.")
    assert cli("memory", "reindex", "--include-system", "-o", "json").code == 0
    one = cli("memory", "search", "worker queue retries", "--top-k", "1", "-o", "json").json
    assert len(one["results"]) == 1
    plain = cli("memory", "search", "zanzibar quokka", "-o", "json").json
    assert plain["results"] == []
    system = cli("memory", "search", "zanzibar quokka", "--include-system", "-o", "json").json
    assert [i["memory"]["filename"] for i in system["results"]] == ["_system/dreaming/project_dream_notes.md"]


def test_search_human_output_is_a_table(cli):
    seed(cli)
    result = cli("memory", "search", "runtime docs rendered")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:5] == ["SCORE", "FILENAME", "SCOPE", "WHY", "NOTE"]
    assert any("project_runtime_docs.md" in line and "workspace" in line for line in lines[1:])


def test_a_trivial_search_is_skipped_without_an_error(cli):
    seed(cli)
    result = cli("memory", "search", "where is it", "-o", "json")
    assert result.code == 0
    assert result.json["results"] == [] and result.json["skipped"] is True
    assert result.json["skip_reason"] == "no_meaningful_words"


def test_a_one_word_search_finds_what_it_names(cli):
    seed(cli)
    result = cli("memory", "search", "docs", "-o", "json")
    assert result.code == 0, result.stderr
    assert result.json["skipped"] is False and result.json["skip_reason"] is None
    assert "project_runtime_docs.md" in [hit["memory"]["filename"] for hit in result.json["results"]]


def test_snapshot_json_carries_text_generation_and_sha256(cli):
    seed(cli)
    result = cli("memory", "snapshot", "--session", "S", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    document = result.json
    assert document["text"].startswith("<compozy_memory>")
    assert "project_runtime_docs.md" in document["text"] and "project_grafana_boards.md" in document["text"]
    assert isinstance(document["generation"], int) and document["generation"] >= 2
    assert document["sha256"] == hashlib.sha256(document["text"].encode("utf-8")).hexdigest()
    again = cli("memory", "snapshot", "--session", "S", "-o", "json").json
    assert again["text"] == document["text"] and again["cached"] is True


def test_snapshot_with_a_query_carries_the_recall_block(cli):
    seed(cli)
    text = cli("memory", "snapshot", "--query", "where are the runtime docs rendered?", "-o", "json").json["text"]
    assert text.index("<compozy_memory_index") < text.index("<compozy_recall>")
    human = cli("memory", "snapshot", "--query", "where are the runtime docs rendered?")
    assert human.code == 0 and human.stdout.rstrip("\n") == text.rstrip("\n")


def test_snapshot_show_log_lists_the_injections(cli):
    seed(cli)
    started = cli("memory", "snapshot", "--session", "S", "--query", "runtime docs rendered", "-o", "json").json
    result = cli("memory", "snapshot", "--session", "S", "--show-log", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    log = result.json
    assert log["session_id"] == "S" and log["generation"] == started["generation"]
    assert log["sha256"] == started["sha256"]
    pairs = {(item["filename"], item["source"], item["scope"]) for item in log["injections"]}
    assert ("project_runtime_docs.md", "index", "workspace") in pairs
    assert ("project_grafana_boards.md", "index", "global") in pairs
    assert ("project_runtime_docs.md", "recall", "workspace") in pairs
    human = cli("memory", "snapshot", "--session", "S", "--show-log")
    assert human.stdout.startswith(f"session S at generation {started['generation']}")


def test_a_sub_agent_snapshot_is_its_parents_bytes_and_an_unknown_parent_is_not_found(cli):
    seed(cli)
    parent = cli("memory", "snapshot", "--session", "P", "-o", "json").json
    write(cli, "Commit Style", "Conventional commits", "Commit messages follow conventional commits.")
    child = cli("memory", "snapshot", "--session", "C", "--parent-session", "P", "-o", "json").json
    assert child["text"] == parent["text"] and child["sha256"] == parent["sha256"]
    missing = cli("memory", "snapshot", "--session", "D", "--parent-session", "nope", "-o", "json")
    assert missing.code != 0 and missing.json["code"] == "memory.not_found"


def test_show_log_without_a_session_is_a_validation_error(cli):
    result = cli("memory", "snapshot", "--show-log", "-o", "json")
    assert result.code != 0
    assert result.json["code"] == "memory.validation"
    assert json.loads(result.stdout)["details"]["field"] == "session_id"
