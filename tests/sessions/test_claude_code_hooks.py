"""The Claude Code hooks adapter, driven as Claude Code drives it: the real `compozy hook claude-code <event>`
process, a recorded hook payload on stdin, and a transcript on disk.

The payloads (tests/sessions/data/claude_code/*.json) and the transcript (transcript_phase1.jsonl, then
transcript_phase2.jsonl appended) were written for these tests in the documented formats: the hook input fields
of the Claude Code hooks reference and the session JSONL schema cited in memory/sessions/claude_code.py. They are
not copied from a real session.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.helpers import workspace_root
from tests.sessions.claude_agent import DATA, SESSION, Agent


@pytest.fixture
def agent(cli: Cli) -> Agent:
    return Agent(cli)


def test_session_start_answers_with_the_frozen_memory_section_as_additional_context(agent):
    assert agent.cli("memory", "write", "--type", "project", "--name", "Billing Worker", "--description",
                     "Where the billing worker runs",
                     "--content", "The billing worker runs on the queue host.").code == 0
    started = agent.hook("SessionStart")
    output = json.loads(started.stdout)
    assert set(output) == {"hookSpecificOutput"}
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "Billing Worker" in context
    snapshot = agent.cli("memory", "snapshot", "--session", SESSION, "--agent", "claude-code")
    assert context.rstrip("\n") + "\n" == snapshot.stdout  # the session's frozen bytes
    shown = agent.cli("session", "show", SESSION, "-o", "json").json["session"]
    assert (shown["agent_name"], shown["type"], shown["status"]) == ("claude-code", "user", "running")
    # After Claude Code compacts its context it starts again with source=compact: the same frozen section.
    again = agent.hook("SessionStart", stdin=agent.payload("SessionStart", source="compact"))
    assert json.loads(again.stdout) == output


def test_prompt_and_stop_hooks_import_each_transcript_line_once_and_close_turns(agent):
    agent.write_transcript("phase1")
    agent.hook("SessionStart")
    assert agent.hook("UserPromptSubmit").stdout == ""
    rows = agent.events()
    assert [(r["kind"], r["content"].split("\n")[0]) for r in rows] == [
        ("user_message", "Migrate the billing worker to asyncio and keep the retry policy."),
        ("assistant_message", "I'll read the worker first."),
        ("tool_call", "Read"),
        ("tool_result", "def run():"),
        ("assistant_message", "We decided to use asyncio.TaskGroup instead of gather. I migrated billing/worker.py."),
        ("tool_call", "Bash"),
        ("tool_result", "FAILED tests/test_worker.py::test_retry - AssertionError: 2 != 3"),
        ("assistant_message", "Fixed the retry count; all tests pass now."),
    ]
    turn = "00000001-0000-4000-8000-000000000001"
    assert {r["turn_id"] for r in rows} == {turn}
    assert rows[2]["data"]["input"]["file_path"].endswith("billing/worker.py")
    assert rows[6]["data"]["is_error"] is True
    assert rows[0]["ts"] == "2026-11-30T09:00:00Z"
    agent.hook("Stop")
    agent.hook("Stop")  # a repeat imports nothing and closes nothing twice
    rows = agent.events()
    assert [r["kind"] for r in rows][8:] == ["done"] and rows[8]["turn_id"] == turn

    agent.write_transcript("phase1", "phase2")
    agent.hook("Stop")
    rows = agent.events()
    second = "00000009-0000-4000-8000-000000000009"
    assert [(r["kind"], r["turn_id"]) for r in rows[9:]] == [
        ("user_message", second), ("assistant_message", second), ("tool_call", second), ("done", second)]
    contents = " ".join(r["content"] for r in rows)
    assert "Sub-agent scratch work" not in contents and "/model" not in contents  # sidechain and meta lines
    assert "The worker uses threads" not in contents  # thinking stays private
    assert [r["seq"] for r in rows] == list(range(1, 14))


def test_pre_compact_covers_the_complete_turns_imported_so_far(agent):
    agent.write_transcript("phase1", "phase2")
    agent.hook("SessionStart")
    agent.hook("PreCompact")
    rows = agent.events()
    first_turn = [r for r in rows if r["turn_id"] == "00000001-0000-4000-8000-000000000001"]
    assert first_turn[-1]["kind"] == "done"  # the newer prompt proved the first turn over
    assert all(r["archived"] for r in first_turn)
    assert not any(r["archived"] for r in rows if r not in first_turn)  # the open turn stays
    shown = agent.cli("session", "show", SESSION, "-o", "json").json
    assert [(c["from_seq"], c["to_seq"]) for c in shown["coverage"]] == [(1, len(first_turn))]
    checkpoint = (workspace_root(agent.cli.cwd) / "project_checkpoint_summary.md").read_text()
    assert "Migrate the billing worker to asyncio" in checkpoint


def test_session_end_imports_the_rest_stops_the_session_and_updates_the_checkpoint(agent):
    agent.write_transcript("phase1", "phase2")
    agent.hook("SessionStart")
    # COMPOZY_Q_SYNC=1 runs the task cluster's checkpoint job inline in the hook process.
    assert agent.hook("SessionEnd", COMPOZY_Q_SYNC="1").stdout == ""
    shown = agent.cli("session", "show", SESSION, "-o", "json").json
    assert shown["session"]["status"] == "stopped"
    assert [r["kind"] for r in agent.events()][-1] == "done"
    checkpoint = (workspace_root(agent.cli.cwd) / "project_checkpoint_summary.md").read_text()
    assert "Now document the worker command in the README." not in checkpoint.split("## Pending asks")[1].split(
        "##")[0]  # answered before the session ended
    assert "billing/worker.py" in checkpoint and "README.md" in checkpoint
    decisions = agent.cli("memory", "decisions", "list", "--filename", "project_checkpoint_summary.md", "-o", "json")
    assert [(d["origin"], d["session_id"]) for d in decisions.json["decisions"]] == [("provider", SESSION)]
    assert agent.log() == []


def test_a_hook_that_cannot_start_the_session_exits_zero_prints_nothing_and_logs_a_stable_code(agent, tmp_path):
    agent.write_transcript("phase1")
    cases = [
        ("not json", "Stop", b"{not json", {}, "hook.payload_invalid"),
        ("no session id", "Stop", b'{"hook_event_name": "Stop"}', {}, "hook.payload_invalid"),
        ("unknown event", "Notification", agent.payload("Stop"), {}, "hook.event_unknown"),
    ]
    for label, event, stdin, env, code in cases:
        result = agent.cli("hook", "claude-code", event, input=stdin, **env)
        assert (result.code, result.stdout) == (0, ""), label
        assert agent.log()[-1]["code"] == code, label
    # A broken configuration file: the service refuses it with its own stable code; the hook still exits 0.
    (agent.cli.cwd / ".compozy").mkdir(exist_ok=True)
    (agent.cli.home / "config.toml").write_text("[memory\nbroken")
    broken = agent.cli("hook", "claude-code", "SessionStart", input=agent.payload("SessionStart"))
    assert (broken.code, broken.stdout) == (0, "")
    assert agent.log()[-1]["code"] == "memory.validation"
    (agent.cli.home / "config.toml").unlink()
    # A home Django cannot even start in.
    blocked = tmp_path / "home-is-a-file"
    blocked.write_text("")
    startup = agent.cli("hook", "claude-code", "Stop", input=agent.payload("Stop"), COMPOZY_HOME=str(blocked))
    assert (startup.code, startup.stdout) == (0, "")


def test_an_unreadable_transcript_is_logged_and_the_rest_of_the_hook_still_runs(agent):
    agent.hook("SessionStart")
    agent.transcript.mkdir()  # a directory where the transcript should be
    result = agent.hook("SessionEnd")
    assert result.stdout == ""
    assert agent.log()[-1]["code"] == "hook.transcript_unreadable"
    assert agent.cli("session", "show", SESSION, "-o", "json").json["session"]["status"] == "stopped"


def readme_settings() -> dict:
    """The README's `.claude/settings.json` snippet: the one ```json block that configures hooks."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", readme, flags=re.S)]
    settings = [block for block in blocks if isinstance(block, dict) and "hooks" in block]
    assert len(settings) == 1, "the README has one .claude/settings.json hooks snippet"
    return settings[0]


def test_the_readme_settings_snippet_runs_this_adapter_for_every_event_it_handles():
    from memory.services.hooks import CLAUDE_CODE_EVENTS

    hooks = readme_settings()["hooks"]
    assert set(hooks) == set(CLAUDE_CODE_EVENTS)
    for event, groups in hooks.items():
        # The settings shape of the hooks reference: event -> [{"hooks": [{"type": "command", "command": …}]}].
        commands = [(hook["type"], hook["command"]) for group in groups for hook in group["hooks"]]
        assert commands == [("command", f"compozy hook claude-code {event}")], event
        # The recorded payload of each configured event names the same event.
        assert json.loads((DATA / f"{event}.json").read_text())["hook_event_name"] == event


def _phase1_lines(agent: Agent) -> list[str]:
    text = (DATA / "transcript_phase1.jsonl").read_text().replace("__CWD__", str(agent.cli.cwd))
    return text.splitlines(keepends=True)


def test_a_prompt_already_in_the_transcript_at_user_prompt_submit_keeps_its_turn_in_transcript_order(agent):
    # Claude Code may write the prompt's line before UserPromptSubmit runs: the hook imports it, and Stop, which
    # re-reads that line, must not close the turn before the reply the transcript holds after it.
    lines = _phase1_lines(agent)
    prompt_end = next(i for i, line in enumerate(lines) if '"uuid": "00000001-' in line) + 1
    agent.transcript.write_text("".join(lines[:prompt_end]))
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    agent.transcript.write_text("".join(lines))
    agent.hook("Stop")
    kinds = [r["kind"] for r in agent.events()]
    assert kinds == ["user_message", "assistant_message", "tool_call", "tool_result", "assistant_message",
                     "tool_call", "tool_result", "assistant_message", "done"]


def test_stop_before_the_reply_reaches_the_transcript_leaves_the_turn_open_until_the_reply_is_imported(agent):
    # Stop can run before the client has flushed the reply's line: `done` waits for it, so the ledger never says
    # the turn ended before its answer.
    lines = _phase1_lines(agent)
    prompt_end = next(i for i, line in enumerate(lines) if '"uuid": "00000001-' in line) + 1
    agent.transcript.write_text("".join(lines[:prompt_end]))
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    agent.hook("Stop")
    assert [r["kind"] for r in agent.events()] == ["user_message"]
    agent.transcript.write_text("".join(lines))
    agent.hook("Stop")
    kinds = [r["kind"] for r in agent.events()]
    assert kinds[0] == "user_message" and kinds[-2:] == ["assistant_message", "done"]
    assert kinds.count("done") == 1


@pytest.mark.parametrize("source", ["compact", "resume"])
def test_session_start_after_compaction_adds_the_checkpoint_compaction_just_wrote_to_the_frozen_section(agent, source):
    assert agent.cli("memory", "write", "--type", "project", "--name", "Billing Worker", "--description",
                     "Where the billing worker runs",
                     "--content", "The billing worker runs on the queue host.").code == 0
    agent.write_transcript("phase1", "phase2")
    first = json.loads(agent.hook("SessionStart").stdout)["hookSpecificOutput"]["additionalContext"]
    assert "<compozy_checkpoint_summary>" not in first  # no checkpoint existed when the session started
    agent.hook("PreCompact")
    checkpoint = (workspace_root(agent.cli.cwd) / "project_checkpoint_summary.md").read_text()
    assert "Migrate the billing worker to asyncio" in checkpoint
    again = json.loads(agent.hook("SessionStart", stdin=agent.payload("SessionStart", source=source)).stdout)
    context = again["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(first)  # the frozen section, byte for byte
    added = context[len(first):]
    assert added.count("<compozy_checkpoint_summary>") == 1
    assert "Migrate the billing worker to asyncio" in added
    # The session's frozen snapshot itself is unchanged.
    shown = agent.cli("session", "show", SESSION, "-o", "json").json
    assert shown["snapshot"]["text"] == first
    # A fresh start (source=startup) of the same session is the frozen section alone.
    assert json.loads(agent.hook("SessionStart").stdout)["hookSpecificOutput"]["additionalContext"] == first


def test_a_snapshot_alone_records_no_running_session_until_the_session_starts(agent):
    assert agent.cli("memory", "write", "--type", "project", "--name", "Billing Worker", "--description",
                     "Where the billing worker runs",
                     "--content", "The billing worker runs on the queue host.").code == 0
    assert agent.cli("memory", "snapshot", "--session", SESSION, "--agent", "claude-code").code == 0
    shown = agent.cli("session", "show", SESSION, "-o", "json").json["session"]
    assert shown["status"] == "snapshot"
    running = agent.cli("session", "list", "--status", "running", "-o", "json").json["sessions"]
    assert SESSION not in [s["session_id"] for s in running]
    agent.hook("SessionStart")
    assert agent.cli("session", "show", SESSION, "-o", "json").json["session"]["status"] == "running"
    history = agent.cli("session", "history", SESSION, "-o", "json").json["events"]
    assert [e["op"] for e in history].count("memory.session.started") == 1
