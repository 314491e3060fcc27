"""The CLI verbs, their flags and output formats, through the real console script."""

from __future__ import annotations

import json
import os
import pty
import subprocess

from tests.conftest import COMPOZY


def write(cli, name, body, *extra):
    result = cli("memory", "write", "--type", "project", "--name", name, "--description", f"About {name}",
                 "--content", body, "-o", "json", *extra)
    assert result.code == 0, result.stdout + result.stderr
    return result.json


def test_content_comes_from_text_a_file_or_stdin(cli, tmp_path):
    source = tmp_path / "body.md"
    source.write_text("Loaded from a file on disk.\n")
    write(cli, "From File", f"@{source}")
    result = cli("memory", "write", "--type", "project", "--name", "From Stdin", "--description", "d",
                 "--content", "-", "-o", "json", input=b"Piped through standard input.")
    assert result.code == 0, result.stdout
    show = cli("memory", "show", "project_from_file.md", "-o", "json").json
    assert show["memory"]["content"] == "Loaded from a file on disk."
    show = cli("memory", "show", "project_from_stdin.md", "-o", "json").json
    assert show["memory"]["content"] == "Piped through standard input."


def test_dry_run_decides_without_writing(cli, memory_root):
    result = write(cli, "Dry Run", "Nothing lands on disk.", "--dry-run")
    assert result["dry_run"] is True and result["applied"] is False
    assert result["decision"]["op"] == "add"
    assert not (memory_root / "project_dry_run.md").exists()
    assert cli("memory", "decisions", "list", "-o", "json").json["decisions"] == []


def test_edit_delete_and_decision_verbs_round_trip(cli):
    added = write(cli, "Ports", "Web on 8000.")
    edited = cli("memory", "edit", "project_ports.md", "--content", "Web on 8080.", "-o", "json").json
    assert edited["decision"]["op"] == "update"
    listed = cli("memory", "decisions", "list", "-o", "json").json
    assert [d["op"] for d in listed["decisions"]] == ["update", "add"]
    assert all("post_content" not in d and "prior_content" not in d for d in listed["decisions"])
    shown = cli("memory", "decisions", "show", edited["decision"]["id"], "-o", "json").json["decision"]
    assert "Web on 8080." in shown["post_content"] and "Web on 8000." in shown["prior_content"]
    filtered = cli("memory", "decisions", "list", "--op", "add", "-o", "json").json["decisions"]
    assert [d["id"] for d in filtered] == [added["decision"]["id"]]
    reverted = cli("memory", "decisions", "revert", edited["decision"]["id"], "-o", "json").json
    assert reverted["reverted"] is True
    assert cli("memory", "show", "project_ports.md", "-o", "json").json["memory"]["content"] == "Web on 8000."
    deleted = cli("memory", "delete", "project_ports.md", "-o", "json").json
    assert deleted["decision"]["op"] == "delete"
    assert cli("memory", "show", "project_ports.md", "-o", "json").json["code"] == "memory.not_found"
    missing = cli("memory", "decisions", "show", "dec_000000000000000000000000", "-o", "json")
    assert missing.json["code"] == "memory.not_found"


def test_history_is_the_legacy_view_over_events(cli):
    write(cli, "Alpha", "First alpha fact.")
    cli("memory", "delete", "project_alpha.md")
    cli("memory", "reindex")
    history = cli("memory", "history", "-o", "json").json["history"]
    assert [item["operation"] for item in history] == ["memory.reindex", "memory.delete", "memory.write"]
    only = cli("memory", "history", "--operation", "memory.write", "-o", "json").json["history"]
    assert [item["operation"] for item in only] == ["memory.write"]
    assert cli("memory", "history", "--operation", "memory.bogus", "-o", "json").json["code"] == "memory.validation"


def test_list_pages_are_counted_and_the_cursor_is_bound_to_its_query(cli):
    for index in range(7):
        write(cli, f"Page Item {chr(97 + index)}", f"Body number {index} with word{index}x{index}.")
    first = cli("memory", "list", "--sort", "name", "--limit", "3", "-o", "json").json
    assert first["page"] == {"total": 7, "limit": 3, "has_more": True, "next_cursor": first["page"]["next_cursor"]}
    seen = [m["name"] for m in first["memories"]]
    cursor = first["page"]["next_cursor"]
    while cursor:
        page = cli("memory", "list", "--sort", "name", "--limit", "3", "--cursor", cursor, "-o", "json").json
        seen += [m["name"] for m in page["memories"]]
        cursor = page["page"]["next_cursor"]
    assert seen == sorted(seen) and len(seen) == 7
    mismatch = cli("memory", "list", "--sort", "recent", "--limit", "3", "--cursor", first["page"]["next_cursor"],
                   "-o", "json")
    assert mismatch.json["code"] == "memory.validation"
    other_type = cli("memory", "list", "--sort", "name", "--type", "user", "--cursor", first["page"]["next_cursor"],
                     "-o", "json")
    assert other_type.json["code"] == "memory.validation"
    garbage = cli("memory", "list", "--cursor", "!!!", "-o", "json")
    assert garbage.json["code"] == "memory.validation"
    big = cli("memory", "list", "--limit", "5000", "-o", "json").json
    assert big["page"]["limit"] == 200
    assert cli("memory", "list", "-o", "json").json["page"]["limit"] == 50


def test_decision_list_pages_too(cli):
    for index in range(3):
        write(cli, f"Decision {index}", f"Distinct body {index} token{index}q.")
    page = cli("memory", "decisions", "list", "--limit", "2", "-o", "json").json
    assert page["page"]["total"] == 3 and page["page"]["has_more"] is True
    rest = cli("memory", "decisions", "list", "--limit", "2", "--cursor", page["page"]["next_cursor"], "-o",
               "json").json
    assert len(rest["decisions"]) == 1
    assert cli("memory", "decisions", "list", "--op", "add", "--cursor", page["page"]["next_cursor"],
               "-o", "json").json["code"] == "memory.validation"


def test_jsonl_writes_one_list_item_per_line(cli):
    write(cli, "One", "First line item.")
    write(cli, "Two", "Second line item.")
    lines = cli("memory", "list", "-o", "jsonl").stdout.strip().splitlines()
    assert len(lines) == 2
    assert {json.loads(line)["filename"] for line in lines} == {"project_one.md", "project_two.md"}


def test_human_output_is_a_readable_table(cli):
    write(cli, "Readable", "A human reads this table.")
    text = cli("memory", "list").stdout
    header = text.splitlines()[0].split()
    assert header == ["FILENAME", "SCOPE", "TYPE", "UPDATED", "NAME"]
    assert "project_readable.md" in text
    health = cli("memory", "health").stdout
    assert "status:" in health and "ok" in health
    assert "files by type:        workspace: project 1" in health.splitlines()


def test_reindex_shows_progress_on_a_terminal(cli):
    write(cli, "Progress", "Reindexed with a progress line.")
    main, secondary = pty.openpty()
    proc = subprocess.Popen([COMPOZY, "memory", "reindex"], cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE,
                            stderr=secondary)
    stdout, _ = proc.communicate(timeout=60)
    os.close(secondary)
    progress = os.read(main, 4096).decode()
    os.close(main)
    assert proc.returncode == 0
    assert "reindexing 1/1 files" in progress
    assert "reindexed 1 of 1 file(s)" in stdout.decode()
    piped = cli("memory", "reindex")
    assert "reindexing" not in piped.stderr


def test_the_console_script_works_from_any_directory(cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = cli("memory", "write", "--type", "user", "--name", "Anywhere", "--description", "d",
                 "--content", "Global memory from an unrelated directory.", "-o", "json", cwd=elsewhere)
    assert result.code == 0, result.stdout
    assert (cli.home / "memory" / "user_anywhere.md").is_file()
    assert not (elsewhere / ".compozy").exists()


def test_decisions_prune_runs_from_the_cli_with_a_dry_run(cli):
    assert cli("memory", "write", "--type", "project", "--name", "Pruned Later", "--description", "d",
               "--content", "Some fact about the build.").code == 0
    dry = cli("memory", "decisions", "prune", "--dry-run", "-o", "json")
    assert dry.code == 0, dry.stderr
    assert dry.json["dry_run"] is True and dry.json["pruned"] == 0 and dry.json["days"] == 90
    human = cli("memory", "decisions", "prune")
    assert human.code == 0 and human.stdout.startswith("pruned 0 applied decision(s) older than 90 days")


def test_compact_merges_the_full_text_indexes_and_health_shows_their_b_trees(cli):
    for index in range(6):  # each write adds a b-tree to both indexes
        write(cli, f"Release {index}", f"Release {index} went to staging.")
    before = cli("memory", "health", "-o", "json").json["fts_segments"]
    assert set(before) == {"memory_fts_unicode", "memory_fts_trigram"} and all(n > 1 for n in before.values())
    result = cli("memory", "compact", "-o", "json")
    assert result.code == 0, result.stdout + result.stderr
    assert [(i["index"], i["segments_before"], i["segments_after"]) for i in result.json["indexes"]] == [
        (name, before[name], 1) for name in ("memory_fts_unicode", "memory_fts_trigram")]
    human = cli("memory", "compact")
    assert human.code == 0 and "every full-text index was already one b-tree" in human.stdout
    assert "full-text b-trees:    memory_fts_unicode 1, memory_fts_trigram 1" in cli("memory", "health").stdout
