from __future__ import annotations

import sqlite3
import sys

from tests.conftest import REPO


def test_basic_usage_examples_write_list_and_show(cli, memory_root):
    first = cli("memory", "write", "--scope", "global", "--type", "user", "--name", "Review Style",
                "--description", "User wants concise review findings with file references first",
                "--content", "Put blocking findings first. Cite file paths and symbols.", "-o", "json")
    assert first.code == 0, first.stderr
    assert first.json["decision"]["op"] == "add"
    assert first.json["applied"] is True
    second = cli("memory", "write", "--scope", "workspace", "--type", "project", "--name", "Runtime Docs Location",
                 "--description", "Runtime docs live in the Fumadocs runtime collection",
                 "--content", "Runtime docs are authored under `packages/site/content/runtime/`.", "-o", "json")
    assert second.code == 0, second.stderr
    third = cli("memory", "write", "--scope", "agent", "--agent", "reviewer", "--agent-tier", "global",
                "--type", "feedback", "--name", "Reviewer Tone", "--description", "Reviewer keeps findings short",
                "--content", "Lead with the blocker. Cite file:line. Keep lists tight.", "-o", "json")
    assert third.code == 0, third.stderr

    # An operator's list names no agent and shows every agent's memories too (issue 27: none hidden).
    listed = cli("memory", "list", "-o", "json").json
    assert sorted(m["filename"] for m in listed["memories"]) == [
        "feedback_reviewer_tone.md", "project_runtime_docs_location.md", "user_review_style.md"]
    with_agent = cli("memory", "list", "--agent", "reviewer", "-o", "json").json
    assert "feedback_reviewer_tone.md" in [m["filename"] for m in with_agent["memories"]]

    shown = cli("memory", "show", "project_runtime_docs_location.md", "--scope", "workspace", "-o", "json").json
    assert shown["memory"]["content"] == "Runtime docs are authored under `packages/site/content/runtime/`."
    assert (memory_root / "project_runtime_docs_location.md").is_file()
    assert (cli.home / "memory" / "user_review_style.md").is_file()
    assert (cli.home / "agents" / "reviewer" / "memory" / "feedback_reviewer_tone.md").is_file()


def test_compozy_and_manage_py_print_the_same_output(cli):
    cli("memory", "write", "--type", "user", "--name", "Tabs", "--description", "Indentation preference",
        "--content", "The user indents with four spaces.")
    via_script = cli("memory", "list", "-o", "json")
    via_manage = cli("memory", "list", "-o", "json", program=[sys.executable, str(REPO / "manage.py")])
    assert via_script.code == via_manage.code == 0
    assert via_script.stdout == via_manage.stdout
    human_script = cli("memory", "list")
    human_manage = cli("memory", "list", program=[sys.executable, str(REPO / "manage.py")])
    assert human_script.stdout == human_manage.stdout


def test_a_fresh_home_is_migrated_on_first_use_and_runs_in_wal_mode(cli):
    assert not (cli.home / "compozy.db").exists()
    result = cli("memory", "list", "-o", "json")
    assert result.code == 0, result.stderr
    connection = sqlite3.connect(cli.home / "compozy.db")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    assert {"memory_decisions", "memory_events", "memory_catalog_entries", "memory_chunks",
            "memory_fts_unicode", "memory_fts_trigram"} <= tables


def test_compozy_home_defaults_to_dot_compozy_in_the_user_home(cli, tmp_path):
    user_home = tmp_path / "user"
    user_home.mkdir()
    env = cli.env(HOME=str(user_home))
    env.pop("COMPOZY_HOME")
    import subprocess

    from tests.conftest import COMPOZY

    proc = subprocess.run([COMPOZY, "memory", "write", "--type", "user", "--name", "Editor",
                           "--description", "Preferred editor", "--content", "The user edits in Helix."],
                          cwd=cli.cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (user_home / ".compozy" / "compozy.db").is_file()
    assert (user_home / ".compozy" / "memory" / "user_editor.md").is_file()
