"""`compozy import claude-code`, run as a user would (the real console script) on a Claude Code folder built in
the test (tests/imports/claude_folder.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Cli
from tests.helpers import workspace_root
from tests.imports.claude_folder import SESSION_A, SESSION_B, build, memory_file, snapshot_of


@pytest.fixture
def folder(tmp_path):
    return build(tmp_path)


def run(cli: Cli, folder, *extra: str) -> dict:
    result = cli("import", "claude-code", "--claude-dir", str(folder.root), "-o", "json", *extra)
    assert result.code == 0, result.stderr + result.stdout
    return result.json


def by_source(document: dict) -> dict[str, dict]:
    return {item["source"].rsplit("/", 1)[-1]: item for item in document["files"]}


def test_a_dry_run_says_what_would_be_imported_and_where_and_writes_nothing(cli, folder):
    before = snapshot_of(folder.root)
    document = run(cli, folder, "--dry-run", "--sessions")
    files = by_source(document)
    assert files["user_role.md"]["outcome"] == "would_add" and files["user_role.md"]["scope"] == "global"
    assert files["project_freeze.md"]["outcome"] == "would_add"
    assert files["project_freeze.md"]["workspace"] == str(folder.alpha)
    assert files["project_legacy.md"]["outcome"] == "skipped"
    assert {s["outcome"] for s in document["sessions"]} == {"would_import"}
    assert document["dry_run"] is True
    # Nothing was written: no workspace in the checkout, no memory, no session, and the Claude folder as it was.
    assert not (folder.alpha / ".compozy").exists()
    listed = cli("memory", "list", "--all-workspaces", "-o", "json")
    assert listed.code == 0 and listed.json["memories"] == []
    sessions = cli("session", "list", "--all-workspaces", "-o", "json")
    assert sessions.code == 0 and sessions.json["sessions"] == []
    assert snapshot_of(folder.root) == before


def test_auto_memory_lands_in_the_scope_its_type_defaults_to_with_its_own_date_and_origin_import(cli, folder):
    before = snapshot_of(folder.root)
    document = run(cli, folder)
    files = by_source(document)
    assert files["user_role.md"]["outcome"] == "added" and files["user_role.md"]["scope"] == "global"
    assert files["feedback_tests.md"]["scope"] == "global"
    assert files["project_freeze.md"]["scope"] == "workspace"
    assert files["project_freeze.md"]["workspace"] == str(folder.alpha)
    assert files["reference_dashboards.md"]["scope"] == "workspace"
    # The project whose checkout is gone: its user-level memory still comes in, its project memory is reported.
    assert files["feedback_commits.md"]["outcome"] == "added"
    assert files["project_legacy.md"]["outcome"] == "skipped"
    assert "checkout_missing" in files["project_legacy.md"]["reason"]
    gone = [p for p in document["projects"] if p["checkout"] is None]
    assert len(gone) == 1 and gone[0]["source"].endswith("retired")
    # The secret is refused by the scanner with its rule; the link and the dangling index line are reported.
    assert files["project_credentials.md"]["outcome"] == "refused"
    assert "scan.secret" in files["project_credentials.md"]["reason"]
    problems = {(p["source"].rsplit("/", 1)[-1], p["reason"]) for p in document["problems"]}
    assert ("user_private.md", "symlink") in problems
    assert ("MEMORY.md", "index_points_to_missing_file") in problems
    assert "user_private.md" not in files
    assert document["summary"] == {"files": 7, "added": 5, "updated": 0, "unchanged": 0, "refused": 1,
                                   "skipped": 1, "sessions": 0, "turns": 0, "candidates": 0}

    shown = cli("memory", "show", files["project_freeze.md"]["filename"], "--workspace", str(folder.alpha),
                "-o", "json")
    assert shown.code == 0, shown.stderr
    summary = shown.json["memory"]["summary"]
    assert summary["created_at"] == "2026-01-01T00:00:00Z" and summary["updated_at"] == "2026-01-01T00:00:00Z"
    decisions = cli("memory", "decisions", "list", "--workspace", str(folder.alpha), "-o", "json")
    freeze = files["project_freeze.md"]["filename"]
    imported = [d for d in decisions.json["decisions"] if d["target_filename"] == freeze]
    assert [d["origin"] for d in imported] == ["import"]
    # Nothing under the Claude folder was written, and the file behind the link was never read into memory.
    assert snapshot_of(folder.root) == before
    listed = cli("memory", "list", "--all-workspaces", "-o", "json")
    assert listed.code == 0 and len(listed.json["memories"]) == 5
    assert "Private" not in {m["name"] for m in listed.json["memories"]}


def test_a_second_import_adds_nothing_an_edited_file_updates_and_a_deleted_memory_is_not_brought_back(cli, folder):
    first = by_source(run(cli, folder))
    again = run(cli, folder)
    assert again["summary"]["added"] == 0 and again["summary"]["updated"] == 0
    assert again["summary"]["unchanged"] == 5

    (folder.alpha_memory / "feedback_tests.md").write_text(memory_file(
        "Integration tests", "Integration tests hit a real database, never mocks", "feedback",
        "Integration tests must hit a real database, the staging copy included."))
    edited = by_source(run(cli, folder))
    assert edited["feedback_tests.md"]["outcome"] == "updated"
    assert edited["feedback_tests.md"]["filename"] == first["feedback_tests.md"]["filename"]
    shown = cli("memory", "show", first["feedback_tests.md"]["filename"], "--scope", "global", "-o", "json")
    assert "staging copy included" in shown.json["memory"]["content"]

    deleted = cli("memory", "delete", first["user_role.md"]["filename"], "--scope", "global")
    assert deleted.code == 0, deleted.stderr
    (folder.alpha_memory / "user_role.md").write_text(memory_file(
        "Role", "The user is a backend engineer new to the frontend", "user", "Eleven years of Go now."))
    after = by_source(run(cli, folder))
    assert after["user_role.md"]["outcome"] == "skipped"
    assert "deleted_in_compozy" in after["user_role.md"]["reason"]
    assert cli("memory", "show", first["user_role.md"]["filename"], "--scope", "global").code != 0


def test_an_imported_memory_is_undone_by_reverting_its_decision(cli, folder):
    files = by_source(run(cli, folder))
    reverted = cli("memory", "decisions", "revert", files["feedback_commits.md"]["decision_id"], "-o", "json")
    assert reverted.code == 0, reverted.stderr
    assert cli("memory", "show", files["feedback_commits.md"]["filename"], "--scope", "global").code != 0


def test_imported_memories_are_found_by_search_and_in_the_next_sessions_snapshot(cli, folder):
    run(cli, folder)
    found = cli("memory", "search", "integration tests real database", "-o", "json", cwd=folder.alpha)
    assert found.code == 0, found.stderr
    assert any("real database" in r["memory"]["description"] for r in found.json["results"])
    started = cli("session", "start", "--query", "when is the merge freeze", "-o", "json", cwd=folder.alpha)
    assert started.code == 0, started.stderr
    text = started.json["snapshot"]["text"]
    assert "Merge freeze" in text and "Integration tests" in text


def test_past_sessions_enter_the_ledger_once_with_each_lines_own_time_oldest_first(cli, folder):
    document = run(cli, folder, "--sessions")
    sessions = {s["session_id"]: s for s in document["sessions"]}
    assert [s["session_id"] for s in document["sessions"]] == [SESSION_A, SESSION_B]
    assert sessions[SESSION_A]["outcome"] == "imported" and sessions[SESSION_A]["turns"] == 2
    assert document["summary"]["sessions"] == 2 and document["summary"]["turns"] == 4
    events = cli("session", "events", SESSION_A, "--workspace", str(folder.alpha), "-o", "json")
    assert events.code == 0, events.stderr
    rows = events.json["events"]
    kinds = [row["kind"] for row in rows]
    assert kinds.count("user_message") == 2 and "tool_call" in kinds and "tool_result" in kinds
    assert not any("continued from a previous conversation" in row["content"] for row in rows)
    assert rows[0]["ts"].startswith("2026-02-02T09:00:00")
    shown = cli("session", "show", SESSION_A, "--workspace", str(folder.alpha), "-o", "json")
    assert shown.json["session"]["status"] == "stopped"

    again = run(cli, folder, "--sessions")
    assert {s["outcome"] for s in again["sessions"]} == {"unchanged"}
    assert len(cli("session", "events", SESSION_A, "--workspace", str(folder.alpha), "-o", "json")
               .json["events"]) == len(rows)


def test_since_leaves_out_older_transcripts(cli, folder):
    import os

    stamp = 1_767_225_600
    os.utime(folder.alpha_memory.parent / f"{SESSION_A}.jsonl", (stamp, stamp))
    document = run(cli, folder, "--sessions", "--since", "2026-06-01", "--dry-run")
    assert [s["session_id"] for s in document["sessions"]] == [SESSION_B]


def test_a_folder_without_projects_is_a_validation_error_naming_the_flag(cli, tmp_path):
    result = cli("import", "claude-code", "--claude-dir", str(tmp_path / "nowhere"), "-o", "json")
    assert result.code != 0
    error = json.loads(result.stdout or result.stderr)
    assert error["code"] == "memory.validation" and error["details"]["field"] == "claude_dir"


@pytest.mark.django_db(transaction=True)
def test_a_long_import_reports_its_progress_one_step_per_file_and_transcript(home, tmp_path):
    from memory.domain.enums import Origin
    from memory.services.imports import ClaudeCodeImportInput, import_claude_code
    from memory.services.inputs import Caller

    folder = build(tmp_path)
    steps: list[tuple[int, int]] = []
    data = ClaudeCodeImportInput.parse({"claude_dir": str(folder.root), "sessions": True, "dry_run": True})
    import_claude_code(data=data, caller=Caller(origin=Origin.CLI, cwd=folder.alpha),
                       progress=lambda done, total: steps.append((done, total)))
    # Seven memory files (the link is not one) and two transcripts, counted as they are done.
    assert steps == [(n, 9) for n in range(1, 10)]


def test_the_cli_draws_a_progress_bar_on_a_terminal(cli, folder):
    import os
    import pty
    import subprocess

    from tests.conftest import COMPOZY

    controller, terminal = pty.openpty()
    proc = subprocess.run([COMPOZY, "import", "claude-code", "--claude-dir", str(folder.root), "--dry-run"],
                          cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE, stderr=terminal, timeout=120)
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(controller)
    assert proc.returncode == 0
    assert b"importing [" in drawn and b"7/7" in drawn
    assert b"would import: 7 files" in proc.stdout


def test_imported_sessions_go_through_the_extractor_and_the_checkpoint_as_if_they_had_just_ended(cli, folder):
    # COMPOZY_Q_SYNC=1 runs the task cluster's jobs inline in the importing process, as a running cluster would.
    result = cli("import", "claude-code", "--claude-dir", str(folder.root), "--sessions", "-o", "json",
                 COMPOZY_Q_SYNC="1")
    assert result.code == 0, result.stderr
    checkpoint = workspace_root(folder.alpha) / "project_checkpoint_summary.md"
    assert checkpoint.is_file()
    assert "health" in checkpoint.read_text().lower()  # the later session's work reached it
    status = cli("memory", "extractor", "status", "-o", "json", cwd=folder.alpha)
    assert status.json["counts"]["completed"] >= 2
    # "From now on, always run the linter before committing." is an instruction the extractor proposes.
    assert result.json["summary"]["candidates"] >= 1
