"""MCP as an agent meets it: the official `mcp` client over stdio, talking to a real `compozy mcp` process.

Checks the tool list and schemas exactly as the client receives them, the safe defaults (agent toolset only, an
agent's writes never global), that an agent recalls its own memories, one-word queries, unknown arguments and
error messages."""

from __future__ import annotations

import json
import re

import pytest

from memory.verbs import all_verbs
from tests.conftest import Cli
from tests.surfaces.helpers import session

ENUMS = {
    "scope": ["global", "workspace", "agent"],
    "agent_tier": ["workspace", "global"],
    "type": ["user", "feedback", "project", "reference"],
    "op": ["add", "update", "delete", "noop", "reject"],
    "origin": ["cli", "http", "uds", "tool", "extractor", "dreaming", "file", "provider"],
    "sort": ["recent", "name"],
}


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    """One `compozy mcp --agent coder` session doing what an agent does, after an operator wrote a global memory."""
    base = tmp_path_factory.mktemp("agent")
    (base / "home").mkdir()
    (base / "project" / ".git").mkdir(parents=True)
    cli = Cli(home=base / "home", cwd=base / "project")
    operator = cli("memory", "write", "--scope", "global", "--type", "user", "--name", "Operator Tone",
                   "--description", "Set by the operator", "--content", "The operator prefers terse zqglobal notes.")
    assert operator.code == 0, operator.stderr
    calls = [
        ("compozy__memory_propose", {"operation": "add", "type": "feedback", "name": "Coder Habit",
                                     "description": "What the coder agent learnt",
                                     "content": "Run the zqhabit linter before every commit."}),
        ("compozy__memory_propose", {"operation": "add", "type": "project", "name": "Build Cache",
                                     "description": "Where the build cache lives",
                                     "content": "The zqcache build cache lives in /var/cache/build."}),
        ("compozy__memory_search", {"query": "zqhabit linter commit"}),
        ("compozy__memory_list", {}),
        ("compozy__memory_snapshot", {}),
        ("compozy__memory_search", {"query": "zqcache"}),
        ("compozy__memory_search", {"query": "the of and"}),
        ("compozy__memory_list", {"colour": "blue"}),
        ("compozy__memory_list", {"detail": True, "limit": 1}),
        ("compozy__memory_note", {"title": "Loose End", "type": "user", "content": "Ask about the zqnote flag."}),
        ("compozy__memory_show", {"filename": "feedback_coder_habit.md", "scope": "agent"}),
        ("compozy__memory_list", {"limit": 0}),
        ("compozy__memory_propose", {"operation": "add", "type": "user", "name": "Agent Global",
                                     "description": "An agent reaching for global", "scope": "global",
                                     "content": "Every zqreach project must use tabs."}),
        ("compozy__memory_note", {"title": "Global Note", "type": "user", "scope": "global",
                                  "content": "A zqreach note aimed at global memory."}),
    ]
    tools, answers = session(cli, "--agent", "coder", "--session", "agent-1", calls=calls)
    return cli, {tool.name: tool for tool in tools}, answers


def test_compozy_mcp_serves_only_the_agent_toolset_unless_told(agent_run):
    cli, tools, _answers = agent_run
    assert set(tools) == {"compozy__memory_list", "compozy__memory_show", "compozy__memory_search",
                          "compozy__memory_snapshot", "compozy__memory_propose", "compozy__memory_note"}
    admin_tools, _ = session(cli, "--toolsets", "compozy__memory,compozy__memory_admin", calls=[])
    assert {"compozy__memory_health", "compozy__memory_decisions_revert", "compozy__memory_admin_history",
            "compozy__memory_decisions_prune"} <= {
        tool.name for tool in admin_tools}


def test_the_schemas_an_agent_receives_describe_every_parameter_with_its_enums(agent_run):
    _cli, tools, _answers = agent_run
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
            assert "$ref" not in json.dumps(prop), (tool.name, name)
            if name in ENUMS:
                assert prop["enum"] == ENUMS[name], (tool.name, name)
        assert tool.output_schema and tool.output_schema["type"] == "object" and tool.output_schema["properties"]
        assert tool.output_schema.get("additionalProperties") is False, tool.name
        assert re.fullmatch(r"compozy__memory_[a-z]+(_[a-z]+)*", tool.name)


def test_propose_declares_its_required_fields_and_the_exact_shape_of_an_operation(agent_run):
    _cli, tools, _answers = agent_run
    schema = tools["compozy__memory_propose"].input_schema
    # operation may be left out when operations is given (the spec's batch payload), so nothing is required.
    assert "operation" not in schema.get("required", [])
    assert schema["properties"]["operation"]["enum"] == ["add", "update", "delete", "batch"]
    item = schema["properties"]["operations"]["items"]
    assert item["type"] == "object" and item["additionalProperties"] is False
    assert set(item["properties"]) == {"action", "content", "old_text"} and item["required"] == ["action"]
    assert item["properties"]["action"]["enum"] == ["add", "replace", "remove"]
    decision = tools["compozy__memory_propose"].output_schema["properties"]["decision"]
    assert decision["type"] == "object" and "op" in decision["properties"]
    assert tools["compozy__memory_note"].input_schema["required"] == ["title", "content"]


def test_tools_carry_annotations_that_say_what_they_may_change(agent_run):
    _cli, tools, _answers = agent_run
    for name in ("compozy__memory_list", "compozy__memory_show", "compozy__memory_search", "compozy__memory_snapshot"):
        assert tools[name].annotations.read_only_hint is True, name
    propose = tools["compozy__memory_propose"].annotations
    assert propose.read_only_hint is False and propose.destructive_hint is True and propose.idempotent_hint is True
    note = tools["compozy__memory_note"].annotations
    assert note.read_only_hint is False and note.destructive_hint is False


def test_the_tool_names_follow_the_cli_words(agent_run):
    for verb in all_verbs():
        if verb.tool and verb.command and verb.tool.name != "compozy__memory_admin_history":
            # A hyphenated CLI word (`list-failures`) becomes an underscore: tool names use one separator.
            assert verb.tool.name == "compozy__" + "_".join(verb.command).replace("-", "_"), verb.tool.name


def test_an_agents_writes_without_a_scope_never_go_global(agent_run):
    cli, _tools, answers = agent_run
    habit, cache = answers[0][1]["decision"], answers[1][1]["decision"]
    assert (habit["scope"], habit["agent_name"], habit["agent_tier"]) == ("agent", "coder", "workspace")
    assert cache["scope"] == "workspace"
    assert (cli.cwd / ".compozy" / "agents" / "coder" / "memory" / "feedback_coder_habit.md").is_file()
    assert not (cli.home / "memory" / "feedback_coder_habit.md").exists()
    note_error, note = answers[9]
    assert not note_error and note["decision"]["scope"] == "agent" and note["decision"]["agent_name"] == "coder"


def test_an_agent_cannot_write_global_memory_even_when_it_names_the_scope(agent_run):
    cli, _tools, answers = agent_run
    for error, refused in answers[12:14]:
        assert error and refused["code"] == "memory.scope.invalid"
        assert refused["details"] == {"field": "scope", "reason": "global_operator_only"}
    global_root = cli.home / "memory"
    assert not [path for path in global_root.rglob("*.md") if "zqreach" in path.read_text()]
    decisions = cli("memory", "decisions", "list", "-o", "json", "--origin", "tool")
    assert decisions.code == 0, decisions.stderr
    rows = json.loads(decisions.stdout)["decisions"]
    assert len(rows) >= 2 and all(row["scope"] != "global" for row in rows)


def test_an_agent_recalls_its_own_memories_with_global_and_workspace_ones(agent_run):
    _cli, _tools, answers = agent_run
    error, found = answers[2]
    assert not error and found["results"][0]["memory"]["filename"] == "feedback_coder_habit.md"
    error, listed = answers[3]
    scopes = {m["filename"]: m["scope"] for m in listed["memories"]}
    assert scopes == {"feedback_coder_habit.md": "agent", "project_build_cache.md": "workspace",
                      "user_operator_tone.md": "global"}
    error, snapshot = answers[4]
    assert not error and "Coder Habit" in snapshot["text"] and "Operator Tone" in snapshot["text"]
    error, shown = answers[10]
    assert not error and "zqhabit" in shown["memory"]["content"]


def test_a_one_word_query_works_and_a_query_without_meaning_says_it_was_skipped(agent_run):
    _cli, tools, answers = agent_run
    error, one_word = answers[5]
    assert not error and one_word["skipped"] is False
    assert [hit["memory"]["filename"] for hit in one_word["results"]][:1] == ["project_build_cache.md"]
    error, empty = answers[6]
    assert not error and empty["skipped"] is True and empty["skip_reason"] == "no_meaningful_words"
    assert "skip_reason" in tools["compozy__memory_search"].description


def test_list_items_are_brief_unless_detail_is_asked_for(agent_run):
    _cli, _tools, answers = agent_run
    brief = answers[3][1]["memories"][0]
    assert set(brief) == {"filename", "name", "description", "type", "scope", "agent_name", "agent_tier",
                          "updated_at"}
    error, detailed = answers[8]
    assert not error and {"content_hash", "size", "workspace_id", "created_at"} <= set(detailed["memories"][0])


def test_unknown_arguments_and_bad_limits_are_refused_with_messages_that_name_fields(agent_run):
    _cli, _tools, answers = agent_run
    error, unknown = answers[7]
    assert error and unknown["code"] == "memory.validation" and unknown["details"]["field"] == "colour"
    error, low = answers[11]
    assert error and low["code"] == "memory.validation" and low["details"]["field"] == "limit"
    for _error, document in (answers[7], answers[11]):
        assert "--" not in document["message"]


def test_without_an_agent_name_a_personal_memory_still_stays_out_of_global(cli):
    _tools, answers = session(cli, calls=[
        ("compozy__memory_propose", {"operation": "add", "type": "user", "name": "Nameless", "description": "d",
                                     "content": "Written by an agent without a name."}),
        ("compozy__memory_propose", {"operation": "add", "type": "feedback", "name": "Agentless",
                                     "description": "d", "content": "Scope agent, but no agent name.",
                                     "scope": "agent"}),
    ])
    assert answers[0][1]["decision"]["scope"] == "workspace"
    error, refused = answers[1]
    assert error and refused["code"] == "memory.scope.invalid" and "agent_name" in refused["message"]
    assert "--" not in refused["message"]
