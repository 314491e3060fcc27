"""A writer or a reindex killed (os._exit, as kill -9) in the middle of indexing leaves no memory without its
vectors once the next process has started."""

from __future__ import annotations

import pytest

from memory.controller.faults import FAULT_EXIT_CODE
from memory.domain.passages import SPLIT_WORDS
from tests.crash.run import Run

LONG = "".join(f"## Step {n}\n\n" + " ".join(f"stage{n}word{k}" for k in range(90)) + "\n\n" for n in range(5))


def chunk_vectors(run: Run) -> list[tuple[str, int, bool, str]]:
    return run.query("SELECT e.filename, c.ordinal, c.vector IS NOT NULL, c.vector_model FROM memory_chunks c "
                     "JOIN memory_catalog_entries e ON e.id = c.entry_id WHERE e.is_system = 0 "
                     "ORDER BY e.filename, c.ordinal")


def assert_every_chunk_has_a_vector(run: Run, filenames: set[str]) -> None:
    rows = chunk_vectors(run)
    assert {row[0] for row in rows} == filenames
    assert all(has and model.startswith("wordllama") for _f, _o, has, model in rows), rows
    health = run.health()
    assert health["vectors"]["missing"] == 0 and health["vectors"]["other_model"] == 0


def test_a_writer_killed_inside_the_catalog_write_leaves_every_chunk_with_its_vector_after_replay(tmp_path):
    assert len(LONG.split()) > SPLIT_WORDS
    run = Run.create(tmp_path)
    crashed = run.write({"name": "Pipeline steps", "description": "The five stages", "content": LONG},
                        fault="inside_catalog_write")
    assert crashed.code == FAULT_EXIT_CODE, (crashed.stdout, crashed.stderr)
    assert chunk_vectors(run) == []  # the transaction with the rows and their vectors did not commit
    run.ok("memory", "list", "-o", "json")  # the next process replays the decision
    assert_every_chunk_has_a_vector(run, {"project_pipeline_steps.md"})
    assert len(chunk_vectors(run)) == 5
    assert run.health()["status"] == "ok"


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_reindex_killed_before_it_commits_leaves_every_chunk_with_its_vector_after_the_next_start(tmp_path,
                                                                                                  rebuild):
    run = Run.create(tmp_path)
    run.ok("memory", "write", "--scope", "workspace", "--type", "project", "--name", "Short note",
           "--description", "A note", "--content", "One short line about the release train.", "-o", "json")
    (run.root / "project_hand_written.md").write_text(
        "---\nname: Hand written\ndescription: Written in an editor\ntype: project\nscope: workspace\n---\n"
        + LONG, "utf-8")
    args = ["memory", "reindex", "-o", "json"] + (["--rebuild"] if rebuild else [])
    crashed = run(*args, fault="inside_reindex")
    assert crashed.code == FAULT_EXIT_CODE, (crashed.stdout, crashed.stderr)
    run.ok("memory", "list", "-o", "json")
    # Whatever the killed reindex had recorded was replayed whole; a file it had not reached yet is drift that
    # health reports, never a row without vectors.
    indexed = {row[0] for row in chunk_vectors(run)}
    assert "project_short_note.md" in indexed
    assert_every_chunk_has_a_vector(run, indexed)
    run.ok(*args)
    assert_every_chunk_has_a_vector(run, {"project_short_note.md", "project_hand_written.md"})
    assert run.health()["status"] == "ok"
