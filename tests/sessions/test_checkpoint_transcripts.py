"""The checkpoint says what happened (issue 26 item 4): realistic Claude Code sessions (tests/sessions/data/checkpoint,
tool calls included) go through the real `compozy hook claude-code` SessionStart and SessionEnd, and the checkpoint
the stop wrote has their completed work, decisions, pending asks, the workspace's files (no caches, temp paths or
error text) and the session's current goal (not a greeting, not an injected block, not the already-fixed problem)."""

from __future__ import annotations

import json
from pathlib import Path

from memory.domain.checkpoint import parse
from tests.conftest import Cli
from tests.helpers import workspace_root

DATA = Path(__file__).resolve().parent / "data" / "checkpoint"


def checkpoint_after(cli: Cli, name: str) -> dict[str, list[str]]:
    transcript = cli.cwd.parent / f"{name}.jsonl"
    transcript.write_text((DATA / f"{name}.jsonl").read_text())
    return checkpoint_of(cli, transcript)


def checkpoint_of(cli: Cli, transcript: Path) -> dict[str, list[str]]:
    """The workspace checkpoint after the transcript's session started and ended through the hooks."""
    text = transcript.read_text().replace("__CWD__", str(cli.cwd))
    transcript.write_text(text)
    session = json.loads(text.splitlines()[0])["sessionId"]
    for event in ("SessionStart", "SessionEnd"):
        payload = {"session_id": session, "transcript_path": str(transcript), "cwd": str(cli.cwd),
                   "hook_event_name": event, "source": "startup", "reason": "exit"}
        # COMPOZY_Q_SYNC=1 runs the task cluster's checkpoint job inline in the hook process.
        result = cli("hook", "claude-code", event, input=json.dumps(payload).encode(), COMPOZY_Q_SYNC="1")
        assert result.code == 0, result.stderr
    return parse((workspace_root(cli.cwd) / "project_checkpoint_summary.md").read_text())


def joined(items: list[str]) -> str:
    return "\n".join(items)


def test_the_safari_crash_session_gives_its_fix_its_pending_ci_run_pnpm_only_and_its_files(cli):
    sections = checkpoint_after(cli, "safari_crash")
    assert "`CheckoutSummary` now handles an empty cart" in joined(sections["completed"]), sections
    assert "e2e/empty-cart.spec.ts" in joined(sections["completed"]), sections
    assert "run the E2E test in CI on WebKit" in joined(sections["pending"]), sections
    assert "pnpm only" in joined(sections["decisions"]), sections
    assert sections["files"][:2] == ["e2e/empty-cart.spec.ts", "src/components/CheckoutSummary.tsx"], sections
    everything = joined([item for items in sections.values() for item in items])
    assert "ms-playwright" not in joined(sections["files"]) and "project_checkout_flow.md" not in everything
    assert "compozy_memory" not in everything
    # The current goal: the last request, not the greeting, not the crash already fixed.
    assert sections["goal"] == ["Now write an end-to-end test for the empty cart."], sections


def test_the_rate_limit_session_gives_its_redis_decision_its_todo_and_not_its_greeting(cli):
    sections = checkpoint_after(cli, "rate_limit")
    assert sections["goal"] == ["Add rate limiting to the /api/login endpoint: at most 5 attempts per minute per IP."]
    assert "We'll use a sliding window on that client rather than adding a new dependency." in sections["decisions"]
    assert "Added rate limiting to /api/login: 5 attempts per minute per IP, answered with 429 after that." in (
        sections["completed"]), sections
    assert any("document the limit in docs/api.md" in item for item in sections["pending"]), sections
    assert set(sections["files"]) >= {"app/middleware/rate_limit.py", "app/main.py", "app/cache.py"}, sections
    assert not [path for path in sections["files"] if path.startswith("/") or "site-packages" in path], sections


def test_the_export_session_keeps_workspace_files_only_and_its_latest_request_as_goal(cli):
    sections = checkpoint_after(cli, "export_job")
    assert sections["goal"] == ["One more thing: bump the export timeout to 30 minutes in config/jobs.yaml."]
    assert "Decision: we keep CSV for the export; parquet can come later as a second output." in sections["decisions"]
    completed = joined(sections["completed"])
    assert "Fixed the KeyError in jobs/export.py" in completed and "timeout is 30 minutes" in completed, sections
    assert set(sections["files"]) == {"jobs/export.py", "config/jobs.yaml"}, sections
    assert sections["pending"] == [], sections  # every ask was answered


def test_relative_dates_in_checkpoint_items_are_resolved_against_the_session_time(cli):
    transcript = [json.loads(line) for line in (DATA / "export_job.jsonl").read_text().splitlines()]
    # The session was on 16 November 2026: "yesterday" in it is the 15th, whenever the checkpoint is read.
    transcript[-1]["message"]["content"][0]["text"] = "Done: the timeout we raised yesterday is now 30 minutes."
    dated = cli.cwd.parent / "dated.jsonl"
    dated.write_text("".join(json.dumps(record) + "\n" for record in transcript))
    sections = checkpoint_of(cli, dated)
    assert "Done: the timeout we raised yesterday (15 November 2026) is now 30 minutes." in sections["completed"]

