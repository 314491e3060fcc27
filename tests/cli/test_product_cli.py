"""The `compozy` console script is the product's: its own commands and version, completion, one-line writes,
quiet closed pipes, keyset pages and exit codes the README documents."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from memory.domain import errors
from memory.verbs import INCOMPLETE_EXIT
from tests.conftest import COMPOZY, REPO
from tests.helpers import workspace_root


def test_the_help_lists_the_products_commands_and_none_of_djangos(cli):
    result = cli("--help")
    assert result.code == 0, result.stderr
    listed = set(re.findall(r"^    (\w[\w-]*)", result.stdout, re.MULTILINE))
    assert {"memory", "serve", "mcp", "inspector", "completion"} <= listed
    for django_command in ("flush", "dbshell", "startproject", "migrate", "shell", "runserver", "qcluster"):
        assert django_command not in listed
    refused = cli("flush")
    assert refused.code == 2 and "manage.py" in refused.stderr


def test_the_version_is_the_products_own(cli):
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = cli("--version")
    assert result.code == 0 and result.stdout.strip() == f"compozy {expected}"


def test_a_write_prints_one_line_and_its_rule_trace_only_with_verbose(cli):
    quiet = cli("memory", "write", "--type", "project", "--name", "One Line", "--description", "Short output",
                "--content", "A write answers with one line.")
    assert quiet.code == 0, quiet.stderr
    lines = quiet.stdout.strip().splitlines()
    assert len(lines) == 1
    op, filename, decision_id = lines[0].split()[:3]
    assert (op, filename) == ("add", "project_one_line.md") and re.fullmatch(r"dec_[0-9a-f]{24}", decision_id)
    verbose = cli("memory", "edit", "project_one_line.md", "--content", "A write answers with one line, or more.",
                  "-v")
    assert verbose.code == 0, verbose.stderr
    assert verbose.stdout.splitlines()[0].startswith("update  project_one_line.md  dec_")
    assert "RULE" in verbose.stdout and "filename_collision" in verbose.stdout


def test_an_error_names_the_field_and_the_cli_adds_its_flag(cli):
    result = cli("memory", "write", "--scope", "agent", "--type", "feedback", "--name", "x", "--description", "y",
                 "--content", "Agent memory without an agent.")
    assert result.code == 2
    assert "error: Scope agent needs --agent." in result.stderr and "field: agent_name (--agent)" in result.stderr
    as_json = cli("memory", "write", "--scope", "agent", "--type", "feedback", "--name", "x", "--description", "y",
                  "--content", "Agent memory without an agent.", "-o", "json").json
    assert as_json["code"] == "memory.scope.invalid" and "--" not in as_json["message"]


def _seed_many(cli, count: int) -> None:
    """Memories written straight to disk and indexed by one reindex: quicker than a process per write."""
    root = workspace_root(cli.cwd)
    root.mkdir(parents=True)
    (cli.cwd / ".compozy" / "workspace.toml").write_text(
        'workspace_id = "01HXJ9YR4Q0000000000000000"\ncreated_at = "2026-05-04T14:30:00Z"\n'
        f'realpath_at_creation = "{cli.cwd}"\n')
    for index in range(count):
        (root / f"reference_note_{index:03d}.md").write_text(
            f"---\nname: Note {index:03d}\ndescription: A reference note numbered {index} for paging\n"
            f"type: reference\nscope: workspace\n---\n\nReference body {index} " + "padding " * 40 + "\n")
    assert cli("memory", "reindex", "-o", "json").code == 0


def test_a_closed_pipe_ends_a_listing_quietly(cli):
    _seed_many(cli, 200)
    proc = subprocess.Popen([COMPOZY, "memory", "list", "--limit", "200", "--detail", "-o", "jsonl"], cwd=cli.cwd,
                            env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does after its first line
    proc.wait(timeout=120)
    stderr = proc.stderr.read().decode()
    assert json.loads(first)["filename"].startswith("reference_note_")
    assert proc.returncode == 0 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_a_page_of_fifty_is_brief_unless_detail_is_asked_for(cli):
    _seed_many(cli, 50)
    brief = cli("memory", "list", "-o", "json")
    detail = cli("memory", "list", "--detail", "-o", "json")
    assert len(brief.json["memories"]) == len(detail.json["memories"]) == 50
    assert set(brief.json["memories"][0]) == {"filename", "name", "description", "type", "scope", "agent_name",
                                              "agent_tier", "updated_at"}
    # The hashes, ids and sizes are most of an item's bytes.
    assert len(brief.stdout) < 0.6 * len(detail.stdout), (len(brief.stdout), len(detail.stdout))


def test_a_write_between_two_pages_neither_repeats_nor_skips_an_item(cli):
    _seed_many(cli, 5)
    first = cli("memory", "list", "--sort", "name", "--limit", "2", "-o", "json").json
    assert [m["name"] for m in first["memories"]] == ["Note 000", "Note 001"]
    # A new memory sorting before the cut: an offset cursor would repeat Note 001 on the next page.
    added = cli("memory", "write", "--type", "reference", "--name", "Note 000a", "--description", "Sorts early",
                "--content", "Inserted between two page reads.")
    assert added.code == 0, added.stderr
    second = cli("memory", "list", "--sort", "name", "--limit", "2", "--cursor", first["page"]["next_cursor"],
                 "-o", "json").json
    assert [m["name"] for m in second["memories"]] == ["Note 002", "Note 003"]
    history = cli("memory", "history", "--limit", "1", "-o", "json").json
    assert len(history["history"]) == 1 and history["page"]["has_more"] is True
    older = cli("memory", "history", "--limit", "1", "--cursor", history["page"]["next_cursor"], "-o", "json").json
    assert older["history"][0] != history["history"][0]


def test_out_of_range_limits_are_refused_below_one_and_lowered_above_the_maximum(cli):
    low = cli("memory", "list", "--limit", "0", "-o", "json")
    assert low.code == 2 and low.json["code"] == "memory.validation" and low.json["details"]["field"] == "limit"
    high = cli("memory", "list", "--limit", "5000", "-o", "json")
    assert high.code == 0 and high.json["page"]["limit"] == 200
    history = cli("memory", "history", "--limit", "0", "-o", "json")
    assert history.json["details"]["field"] == "limit"


def test_history_never_prints_an_unknown_agent(cli):
    cli("memory", "write", "--type", "project", "--name", "Agent Recall", "--description", "d",
        "--content", "Searched from an agent scope zqagent.")
    cli("memory", "search", "zqagent", "--scope", "agent", "--agent", "coder")
    result = cli("memory", "history")
    assert result.code == 0 and "None" not in result.stdout
    assert "agent:coder:workspace" in result.stdout


def test_shell_completion_is_offered_for_bash_and_zsh_and_completes_verbs_and_choices(cli, tmp_path):
    for shell in ("bash", "zsh"):
        script = cli("completion", shell)
        assert script.code == 0 and "compozy" in script.stdout and "_ARGCOMPLETE" in script.stdout

    def complete(line: str) -> set[str]:
        out = tmp_path / "completions"
        env = cli.env(_ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE=line, COMP_POINT=str(len(line)),
                      _ARGCOMPLETE_STDOUT_FILENAME=str(out))
        subprocess.run([COMPOZY], env=env, cwd=cli.cwd, capture_output=True, timeout=120, check=False)
        return {word.strip() for word in out.read_text().split("\n") if word.strip()}

    assert "memory" in complete("compozy mem")
    assert {"list", "search", "snapshot"} <= complete("compozy memory ")
    assert complete("compozy memory list --scope ") == {"global", "workspace", "agent"}


def test_inspector_link_prints_the_running_servers_address(cli):
    run = cli.home / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "serve.json").write_text(json.dumps({"pid": os.getpid(), "bind": "127.0.0.1:8765"}))
    result = cli("inspector", "link")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("http://127.0.0.1:8765/inspector/")
    (run / "serve.json").write_text(json.dumps({"pid": 2**22 + 12345, "bind": "127.0.0.1:8765"}))  # no such pid
    fallback = cli("inspector", "link")
    assert fallback.stdout.startswith("http://127.0.0.1:8000/")


def test_the_readme_documents_every_exit_code():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Exit codes"):]
    for error in vars(errors).values():
        if isinstance(error, type) and issubclass(error, errors.CompozyError):
            assert re.search(rf"\|\s*{error.exit_code}\s*\|[^\n]*`{re.escape(error.code)}`", section), error.code
    assert re.search(r"\|\s*0\s*\|", section)
    assert re.search(rf"\|\s*{INCOMPLETE_EXIT}\s*\|\s*\|\s*partly done", section)


@pytest.mark.parametrize("command", ["serve", "mcp", "inspector"])
def test_the_other_product_commands_have_help_for_every_flag_and_no_django_options(command):
    from compozy.cli import product_commands

    parsers = [product_commands()[command].create_parser("compozy", command)]
    while parsers:
        parser = parsers.pop()
        flags = {flag for action in parser._actions for flag in action.option_strings}
        assert not flags & {"--settings", "--pythonpath", "--traceback", "--no-color"}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            else:
                assert action.help, (command, action.option_strings)


def test_the_scripts_are_run_from_anywhere(cli, tmp_path):
    elsewhere = Path(tmp_path) / "elsewhere"
    elsewhere.mkdir()
    assert cli("memory", "list", "-o", "json", cwd=elsewhere).code == 0


def test_the_session_commands_description_names_every_session_verb(cli):
    from memory.verbs import verbs_of

    verbs = {verb.command[1] for verb in verbs_of("session")}
    assert "history" in verbs
    described = cli("session", "--help").stdout.split("verbs:")[0]
    assert all(re.search(rf"\b{verb}\b", described) for verb in verbs), (verbs, described)


def test_a_human_search_shows_every_part_of_the_score_and_says_what_each_letter_means(cli):
    written = cli("memory", "write", "--type", "project", "--name", "Runtime Docs", "--description",
                  "Where the runtime docs sit", "--content", "The runtime docs sit in docs/runtime.")
    assert written.code == 0, written.stderr
    result = cli("memory", "search", "where do the runtime docs sit")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    row = next(line for line in lines if "project_runtime_docs.md" in line)
    parts = dict((m[0], float(m[1])) for m in re.findall(r"\b([wtmkrs])(\d\.\d\d)\b", row))
    assert set(parts) == {"w", "t", "m", "k", "r", "s"}, row
    assert abs(sum(parts.values()) - float(row.split()[0])) <= 0.03, row
    legend = lines[-1]
    assert legend.startswith("why: ") and "m meaning" in legend and "w word match" in legend


def _global_and_workspace_memory_then_elsewhere(cli, tmp_path, global_words: str, workspace_words: str):
    """One global and one workspace memory written in the project, and a directory outside any workspace."""
    for scope, words in (("global", global_words), ("workspace", workspace_words)):
        written = cli("memory", "write", "--scope", scope, "--type", "user" if scope == "global" else "project",
                      "--name", f"Indent {scope}", "--description", "d", "--content", f"Indent with {words}.")
        assert written.code == 0, written.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return elsewhere


def test_a_search_outside_any_workspace_says_it_searched_global_memory_only(cli, tmp_path):
    elsewhere = _global_and_workspace_memory_then_elsewhere(cli, tmp_path, "zqeverywhere tabs", "zqhere spaces")
    outside = cli("memory", "search", "indent", "-o", "json", cwd=elsewhere)
    assert outside.code == 0, outside.stderr
    assert [hit["memory"]["scope"] for hit in outside.json["results"]] == ["global"]
    assert outside.json["warning"].startswith(f"no workspace found from {elsewhere}: only global memories")
    human = cli("memory", "search", "indent", cwd=elsewhere)
    assert human.stdout.startswith("warning: no workspace found"), human.stdout
    # Asking for global memory, or searching inside the project, is not narrower than asked.
    assert cli("memory", "search", "indent", "--scope", "global", "-o", "json", cwd=elsewhere).json["warning"] is None
    inside = cli("memory", "search", "indent", "-o", "json")
    assert inside.json["warning"] is None and len(inside.json["results"]) == 2


def test_a_list_outside_any_workspace_says_it_listed_global_memory_only(cli, tmp_path):
    elsewhere = _global_and_workspace_memory_then_elsewhere(cli, tmp_path, "tabs", "spaces")
    outside = cli("memory", "list", "-o", "json", cwd=elsewhere)
    assert outside.code == 0, outside.stderr
    assert [memory["scope"] for memory in outside.json["memories"]] == ["global"]
    assert outside.json["warning"].startswith(f"no workspace found from {elsewhere}: only global memories were listed")
    human = cli("memory", "list", cwd=elsewhere)
    assert human.stdout.startswith("warning: no workspace found"), human.stdout
    assert cli("memory", "list", "--scope", "global", "-o", "json", cwd=elsewhere).json["warning"] is None
    assert cli("memory", "list", "--all-workspaces", "-o", "json", cwd=elsewhere).json["warning"] is None
    inside = cli("memory", "list", "-o", "json")
    assert inside.json["warning"] is None and len(inside.json["memories"]) == 2


def test_human_session_events_name_the_archived_column(cli):
    started = cli("session", "start", "--session", "ev-1", "-o", "json")
    assert started.code == 0, started.stderr
    cli("session", "append", "ev-1", "--kind", "user_message", "--content", "Migrate the worker", "--turn-id", "t1")
    table = cli("session", "events", "ev-1").stdout.splitlines()
    assert table[0].split() == ["SEQ", "TURN", "KIND", "ARCHIVED", "CONTENT"], table
    assert table[1].split()[:4] == ["1", "t1", "user_message", "no"], table


def test_every_view_prints_times_to_the_second_and_marked_utc(cli):
    written = cli("memory", "write", "--type", "project", "--name", "Timed", "--description", "Times in views",
                  "--content", "A view prints its times as the tables do.", "-o", "json")
    assert written.code == 0, written.stderr
    cli("session", "start", "--session", "timed-1")
    appended = cli("session", "append", "timed-1", "--kind", "user_message", "--content", "Hi.", "--turn-id", "t1")
    assert appended.code == 0, appended.stderr
    views = [cli("memory", "show", "project_timed.md").stdout,
             cli("memory", "decisions", "show", written.json["decision"]["id"]).stdout,
             cli("session", "show", "timed-1").stdout, cli("memory", "health").stdout,
             # and the tables: the inspector shows local time, so an unmarked time here read as local
             cli("memory", "list").stdout, cli("memory", "decisions", "list").stdout,
             cli("memory", "history").stdout, cli("session", "list").stdout,
             cli("session", "history", "timed-1").stdout]
    for view in views:
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", view), view
        assert not re.search(r"\d\d:\d\d:\d\d\.\d+Z", view), view  # no raw stored value with microseconds
    assert re.search(r"^updated:  \S+ \S+ UTC    created: \S+ \S+ UTC$", views[0], re.MULTILINE), views[0]


def test_an_empty_dream_list_says_where_to_see_what_dreaming_waits_for(cli):
    cli("memory", "write", "--type", "project", "--name", "Dreamless", "--description", "d", "--content", "A body.")
    listed = cli("memory", "dream", "list")
    assert listed.code == 0, listed.stderr
    assert "No dreaming runs yet" in listed.stdout and "compozy memory dream status" in listed.stdout


def test_deleting_a_memory_that_does_not_exist_is_not_found_as_showing_it_is(cli):
    written = cli("memory", "write", "--type", "project", "--name", "Staging DB", "--description", "The port",
                  "--content", "Staging listens on 5433.")
    assert written.code == 0, written.stderr
    deleted = cli("memory", "delete", "project_staging_bd.md", "-o", "json")
    shown = cli("memory", "show", "project_staging_bd.md", "-o", "json")
    assert deleted.code == shown.code == 3
    assert deleted.json["code"] == shown.json["code"] == "memory.not_found"
    # The one that exists is still deleted, dry run or not.
    assert cli("memory", "delete", "project_staging_db.md", "--dry-run").code == 0
    assert cli("memory", "delete", "project_staging_db.md").code == 0


def test_a_list_names_no_agent_yet_shows_every_agents_memories_and_agents_lists_them(cli):
    for args in (("--type", "project", "--name", "Runtime docs"),
                 ("--scope", "agent", "--agent", "reviewer", "--type", "feedback", "--name", "Reviewer tone"),
                 ("--scope", "agent", "--agent", "coder", "--agent-tier", "global", "--type", "user",
                  "--name", "Coder style")):
        written = cli("memory", "write", *args, "--description", "About it", "--content", f"{args[-1]} text.")
        assert written.code == 0, written.stderr
    listed = cli("memory", "list", "-o", "json")
    assert {m["name"] for m in listed.json["memories"]} == {"Runtime docs", "Reviewer tone", "Coder style"}
    only_agents = cli("memory", "list", "--scope", "agent", "-o", "json")
    assert {m["name"] for m in only_agents.json["memories"]} == {"Reviewer tone", "Coder style"}
    agents = cli("memory", "agents", "-o", "json")
    assert agents.code == 0, agents.stderr
    assert [(a["agent_name"], a["memories"]) for a in agents.json["agents"]] == [("coder", 1), ("reviewer", 1)]
    assert "reviewer  workspace" in cli("memory", "agents").stdout


def test_cli_errors_name_the_cli_flags_and_the_document_keeps_the_field_names(cli, tmp_path):
    missing_name = cli("memory", "write", "--type", "project", "--description", "d", "--content", "Body.")
    assert "error: Missing --name (or name: in the content's frontmatter)." in missing_name.stderr
    outside = cli("memory", "write", "--type", "project", "--name", "X", "--description", "d", "--content", "Body.",
                  "--workspace", str(tmp_path))
    assert "name the directory as --workspace with --create-workspace" in outside.stderr
    assert "create_workspace" not in outside.stderr.splitlines()[0]
    mixed = cli("memory", "list", "--scope", "global", "--agent", "bob")
    assert "error: --agent and --agent-tier are only allowed with --scope agent." in mixed.stderr
    as_json = cli("memory", "list", "--scope", "global", "--agent", "bob", "-o", "json").json
    assert as_json["message"] == "agent_name and agent_tier are only allowed with scope agent."


def test_a_mistyped_verb_or_command_gets_a_did_you_mean(cli):
    verb = cli("memory", "serach", "foo")
    assert verb.code == 2 and "did you mean 'search'?" in verb.stderr
    assert cli("memory", "serach", "foo", "-o", "json").json["details"]["did_you_mean"] == "search"
    command = cli("memroy", "list")
    assert command.code == 2 and "did you mean 'memory'?" in command.stderr
