"""The frozen snapshot through the real services: section order, caching by generation, byte stability,
sub-agent inheritance, _system exclusion, index caps and the injection log."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest

from memory.domain.errors import NotFound, ValidationError
from tests import helpers as h
from tests.recall import helpers as r

pytestmark = pytest.mark.django_db


def seed(ws):
    """Two workspace memories (indexed) that share no words, so the controller adds both."""
    h.write(ws, name="Runtime Docs", description="Where the runtime docs sit",
            content="The runtime docs sit in docs/runtime and mkdocs renders them.")
    h.write(ws, type="reference", name="Grafana Boards", description="Latency dashboards",
            content="Grafana charts request latency per region.")


def put_checkpoint(ws, body="Last session we were migrating the billing worker to asyncio."):
    r.put(h.workspace_root(ws), "project_checkpoint_summary.md", name="Checkpoint summary",
          description="Where earlier work in this workspace stands", body=body)


def positions(text, *markers):
    found = [text.find(marker) for marker in markers]
    assert all(index >= 0 for index in found), (markers, found, text)
    return found


def test_the_index_comes_before_the_recall_block(ws):
    seed(ws)
    result = r.snapshot(ws, query="where are the runtime docs rendered?")
    text = result["text"]
    index_at, recall_at = positions(text, "<compozy_memory_index", "<compozy_recall>")
    assert index_at < recall_at
    assert text.startswith("<compozy_memory>\n") and text.endswith("</compozy_memory>\n")
    assert "### Runtime Docs (workspace: project_runtime_docs.md)" in text
    assert "<compozy_recall>" not in r.snapshot(ws)["text"]  # no query, no recall block


def test_a_recalled_memory_whose_body_opens_with_its_description_carries_it_once(ws):
    # An extracted fact's description is the fact itself: the prompt gets it once, not twice.
    h.write(ws, type="feedback", name="Use pnpm", description="From now on, use pnpm instead of npm.",
            content="From now on, use pnpm instead of npm.")
    h.write(ws, name="Runtime Docs", description="Where the runtime docs sit",
            content="The runtime docs sit in docs/runtime and mkdocs renders them.")
    text = r.snapshot(ws, query="which package manager, pnpm or npm? and where do runtime docs sit?")["text"]
    recall = text[text.index("<compozy_recall>"):]
    assert recall.count("From now on, use pnpm instead of npm.") == 1, recall
    # A description that says something else stays, on its own line under the heading.
    assert "### Runtime Docs (workspace: project_runtime_docs.md)\nWhere the runtime docs sit\n" in recall


def test_the_sections_come_as_indexes_then_recall_then_the_checkpoint_summary(ws):
    seed(ws)
    put_checkpoint(ws)
    h.reindex(ws)
    text = r.snapshot(ws, query="where are the runtime docs rendered?")["text"]
    index_at, recall_at, checkpoint_at = positions(text, "<compozy_memory_index", "<compozy_recall>",
                                                   "<compozy_checkpoint_summary>")
    assert index_at < recall_at < checkpoint_at
    assert "migrating the billing worker to asyncio" in text[checkpoint_at:]
    assert text.rstrip().endswith("</compozy_checkpoint_summary>\n</compozy_memory>")


def test_the_result_carries_the_generation_and_the_sha256_of_its_text(ws):
    seed(ws)
    result = r.snapshot(ws, session_id="s-1")
    assert result["generation"] >= 1
    assert result["sha256"] == hashlib.sha256(result["text"].encode("utf-8")).hexdigest()
    assert result["session_id"] == "s-1"


def test_the_same_request_at_the_same_generation_is_byte_identical_and_cached(ws):
    seed(ws)
    first = r.snapshot(ws, query="runtime docs rendering")
    second = r.snapshot(ws, query="runtime docs rendering")
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["text"] == first["text"] and second["sha256"] == first["sha256"]
    assert second["generation"] == first["generation"]
    # A new session with the same boot request gets the stored bytes too.
    session = r.snapshot(ws, query="runtime docs rendering", session_id="s-2")
    assert session["cached"] is True and session["text"] == first["text"]


def test_a_committed_write_advances_the_generation_and_the_next_assembly_captures_it_once(ws):
    seed(ws)
    before = r.snapshot(ws)
    h.write(ws, type="feedback", scope="workspace", name="Commit Style", description="Conventional commits",
            content="Commit messages follow conventional commits.")
    after = r.snapshot(ws)
    assert after["generation"] > before["generation"]
    assert after["text"] != before["text"] and "feedback_commit_style.md" in after["text"]
    assert after["cached"] is False
    again = r.snapshot(ws)
    assert again["text"] == after["text"] and again["cached"] is True


def test_a_delete_advances_the_generation_and_the_entry_leaves_the_snapshot(ws):
    seed(ws)
    before = r.snapshot(ws)
    assert "reference_grafana_boards.md" in before["text"]
    h.delete(ws, filename="reference_grafana_boards.md")
    after = r.snapshot(ws)
    assert after["generation"] > before["generation"]
    assert "reference_grafana_boards.md" not in after["text"]
    assert r.snapshot(ws)["text"] == after["text"]


def test_a_hand_written_file_is_picked_up_by_the_next_snapshot_and_advances_the_generation(ws):
    seed(ws)
    before = r.snapshot(ws)
    r.put(h.workspace_root(ws), "project_hand_written.md", name="Hand written", body="Added in an editor.")
    # A new file moves the root directory's mtime: the next call reconciles it first (memory/controller/freshness.py,
    # issue 29), with no reindex and no watcher.
    after = r.snapshot(ws)
    assert after["generation"] > before["generation"]
    assert "project_hand_written.md" in after["text"]
    h.reindex(ws)
    assert r.snapshot(ws)["text"] == after["text"]


def test_a_session_keeps_its_frozen_snapshot_after_later_writes(ws):
    seed(ws)
    first = r.snapshot(ws, session_id="frozen")
    h.write(ws, type="feedback", scope="workspace", name="Commit Style", description="Conventional commits",
            content="Commit messages follow conventional commits.")
    again = r.snapshot(ws, session_id="frozen")
    assert again["text"] == first["text"] and again["generation"] == first["generation"]
    assert "feedback_commit_style.md" not in again["text"]
    assert "feedback_commit_style.md" in r.snapshot(ws, session_id="fresh")["text"]


def test_a_sub_agent_gets_exactly_its_parents_bytes(ws):
    seed(ws)
    parent = r.snapshot(ws, session_id="parent", query="runtime docs rendering")
    h.write(ws, type="feedback", scope="workspace", name="Commit Style", description="Conventional commits",
            content="Commit messages follow conventional commits.")
    child = r.snapshot(ws, session_id="child", parent_session_id="parent")
    assert child["text"].encode() == parent["text"].encode()
    assert child["sha256"] == parent["sha256"] and child["generation"] == parent["generation"]
    assert child["parent_session_id"] == "parent"
    # A different query does not change what the sub-agent inherits.
    other = r.snapshot(ws, session_id="child-2", parent_session_id="parent", query="grafana latency")
    assert other["text"] == parent["text"]


def test_an_unknown_parent_session_is_not_found(ws):
    seed(ws)
    with pytest.raises(NotFound) as missing:
        r.snapshot(ws, session_id="child", parent_session_id="no-such-session")
    assert missing.value.code == "memory.not_found"


def test_system_content_never_appears_in_a_snapshot(ws, memory_root):
    seed(ws)
    r.put(memory_root, "_system/dreaming/project_dream_artifact.md", name="Dream artifact",
          description="Zanzibar quokka dream", body="Zanzibar quokka consolidation notes from the nightly dream.")
    h.reindex(ws, include_system=True)
    assert r.filenames(r.search(ws, "zanzibar quokka", include_system=True))  # it is indexed
    for fields in ({}, {"query": "zanzibar quokka"}, {"session_id": "s", "query": "zanzibar quokka consolidation"}):
        text = r.snapshot(ws, **fields)["text"]
        assert "zanzibar" not in text.lower() and "_system" not in text
    with pytest.raises(ValidationError):
        r.snapshot(ws, include_system=True)


def test_the_index_is_capped_at_max_lines_and_marked_when_truncated(ws, monkeypatch, memory_root):
    monkeypatch.setenv("COMPOZY_MEMORY__FILE__MAX_LINES", "3")
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    for index, word in enumerate(words):
        r.put(memory_root, f"project_{word}.md", name=f"{word.title()} note", description=f"{word} topic",
              body=f"Everything about {word}{index}.", age=timedelta(minutes=10 - index))
    h.reindex(ws)
    text = r.snapshot(ws)["text"]
    section = re.search(r"<compozy_memory_index scope=\"workspace\">\n(.*?)</compozy_memory_index>", text, re.S)
    assert section, text
    entries = [line for line in section.group(1).splitlines() if line.startswith("- [")]
    assert len(entries) == 3
    assert "[index cut: 2 more entries not shown; find them with `compozy memory search <words>`]" in section.group(1)


def test_the_index_is_capped_at_max_bytes_and_marked_when_truncated(ws, monkeypatch, memory_root):
    monkeypatch.setenv("COMPOZY_MEMORY__FILE__MAX_BYTES", "200")
    for index, word in enumerate(["alpha", "bravo", "charlie", "delta", "echo"]):
        r.put(memory_root, f"project_{word}.md", name=f"{word.title()} note",
              description=f"{word} topic with a fairly long description", body=f"About {word}{index}.",
              age=timedelta(minutes=10 - index))
    h.reindex(ws)
    section = re.search(r"<compozy_memory_index scope=\"workspace\">\n(.*?)</compozy_memory_index>",
                        r.snapshot(ws)["text"], re.S).group(1)
    entries = [line for line in section.splitlines() if line.startswith("- [")]
    assert 0 < len(entries) < 5
    assert len("# Memory Index\n" + "".join(line + "\n" for line in entries)) <= 200
    assert f"[index cut: {5 - len(entries)} more entries" in section


def test_without_memory_md_the_index_is_built_from_frontmatter(ws, memory_root):
    seed(ws)
    (memory_root / "MEMORY.md").unlink()
    text = r.snapshot(ws)["text"]
    assert "- [Runtime Docs](project_runtime_docs.md) — Where the runtime docs sit" in text
    assert "- [Grafana Boards](reference_grafana_boards.md) — Latency dashboards" in text


def test_a_stale_index_entry_is_flagged(ws, memory_root):
    r.put(memory_root, "project_old_fact.md", name="Old fact", body="Deploys freeze on Fridays.",
          age=timedelta(days=4))
    r.put(memory_root, "project_new_fact.md", name="New fact", body="Deploys resume on Mondays.")
    h.reindex(ws)
    lines = {line.split("](")[0]: line for line in r.snapshot(ws)["text"].splitlines() if line.startswith("- [")}
    assert lines["- [Old fact"].endswith("(written 4 days ago; verify before relying on it)")
    assert "days ago" not in lines["- [New fact"]


def test_the_injection_log_lists_what_a_session_saw_and_a_sub_agent_sees_the_same(ws):
    seed(ws)
    started = r.snapshot(ws, session_id="main", query="where are the runtime docs rendered?")
    log = r.snapshot_log(ws, "main")
    assert log["session_id"] == "main" and log["parent_session_id"] is None
    assert log["generation"] == started["generation"] and log["sha256"] == started["sha256"]
    seen = {(item["filename"], item["source"]) for item in log["injections"]}
    assert ("project_runtime_docs.md", "index") in seen
    assert ("reference_grafana_boards.md", "index") in seen
    assert ("project_runtime_docs.md", "recall") in seen
    for item in log["injections"]:
        assert item["generation"] == started["generation"]
        assert item["scope"] == "workspace" and item["source"] in ("index", "recall")
    assert [item["position"] for item in log["injections"]] == list(range(len(log["injections"])))

    r.snapshot(ws, session_id="helper", parent_session_id="main")
    child = r.snapshot_log(ws, "helper")
    assert child["parent_session_id"] == "main" and child["sha256"] == log["sha256"]
    assert child["injections"] == log["injections"]


def test_the_injection_log_of_an_unknown_session_is_not_found(ws):
    with pytest.raises(NotFound):
        r.snapshot_log(ws, "never-started")
