"""Transcripts a hook must survive: bad lines, FIFOs and devices, transcripts larger than one read, and payloads
that are not usable. Driven as Claude Code drives the adapter: the real `compozy hook claude-code <event>` process,
a JSON payload on stdin, and a transcript file written by the test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Cli

SESSION = "hook-transcripts-1"


def line(uuid: str, kind: str, text: str, **extra: object) -> str:
    record = {"type": kind, "uuid": uuid, "timestamp": "2026-11-30T09:00:00.000Z", "sessionId": SESSION,
              "message": {"role": kind, "content": text}}
    record.update(extra)
    return json.dumps(record)


class Hooks:
    def __init__(self, cli: Cli, transcript: Path) -> None:
        self.cli, self.transcript = cli, transcript

    def __call__(self, event: str, *, stdin: bytes | None = None, **env: str):
        payload = {"session_id": SESSION, "transcript_path": str(self.transcript), "cwd": str(self.cli.cwd),
                   "hook_event_name": event}
        result = self.cli("hook", "claude-code", event, input=stdin or json.dumps(payload).encode(), **env)
        assert (result.code, result.stderr.count("Traceback")) == (0, 0), result.stderr
        return result

    def rows(self) -> list[tuple[str, str, str]]:
        listed = self.cli("session", "events", SESSION, "--limit", "5000", "-o", "json")
        assert listed.code == 0, listed.stderr
        return [(row["kind"], row["turn_id"], row["content"]) for row in listed.json["events"]]

    def log(self) -> list[dict]:
        path = self.cli.home / "logs" / "hooks.log"
        return [json.loads(entry) for entry in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def hooks(cli: Cli) -> Hooks:
    return Hooks(cli, cli.cwd.parent / "transcript.jsonl")


def test_bad_transcript_lines_are_skipped_or_cut_once_and_every_good_line_around_them_is_imported(hooks):
    bad = {
        # JavaScript cut an emoji in half and wrote its lone high surrogate as an escape.
        "surrogate": '{"type": "user", "uuid": "u-surrogate", "timestamp": "2026-11-30T09:00:02Z", '
                     '"message": {"role": "user", "content": "half an emoji \\ud83d here"}}',
        "too_deep": "[" * 50_000 + "]" * 50_000,
        "uuid_invalid": line("u" * 200, "user", "a prompt whose uuid is 200 characters long"),
        "timestamp_invalid": line("u-badtime", "user", "a prompt stamped with no time", timestamp="not a time"),
    }
    first = [line("u1", "user", "first prompt"), line("a1", "assistant", "first answer"), *bad.values(),
             line("u2", "user", "second prompt"), line("a2", "assistant", "second answer")]
    hooks.transcript.write_text("\n".join(first) + "\n")
    hooks("SessionStart")
    hooks("UserPromptSubmit")
    # Later lines still come in, on the next hooks, and nothing already logged is logged again.
    hooks.transcript.write_text("\n".join([*first, line("u3", "user", "third prompt"),
                                           line("a3", "assistant", "third answer")]) + "\n")
    hooks("Stop")
    hooks("Stop")
    assert [(kind, turn, content) for kind, turn, content in hooks.rows() if kind != "done"] == [
        ("user_message", "u1", "first prompt"), ("assistant_message", "u1", "first answer"),
        ("user_message", "u-surrogate", "half an emoji \ufffd here"),
        ("user_message", "u-badtime", "a prompt stamped with no time"),
        ("user_message", "u2", "second prompt"), ("assistant_message", "u2", "second answer"),
        ("user_message", "u3", "third prompt"), ("assistant_message", "u3", "third answer"),
    ]
    assert [row[1] for row in hooks.rows() if row[0] == "done"] == ["u1", "u-surrogate", "u-badtime", "u2", "u3"]
    logged = [(entry["code"], entry["message"].rsplit(": ", 1)[1]) for entry in hooks.log()]
    assert sorted(logged) == sorted(("hook.transcript_line_invalid", reason) for reason in bad)
    assert all("emoji" not in entry["message"] for entry in hooks.log())  # the line's text is never logged


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_transcript_path_that_is_no_regular_file_is_refused_at_once_and_the_hook_still_runs(hooks, kind):
    if kind == "fifo":
        os.mkfifo(hooks.transcript)  # no writer ever opens it: a blocking read would wait for ever
    else:
        hooks.transcript = Path("/dev/zero")  # endless: a read to the end never ends
    hooks("SessionStart")
    hooks("SessionEnd")
    assert [(entry["code"], entry["event"]) for entry in hooks.log()] == [("hook.transcript_unreadable", "SessionEnd")]
    assert hooks.cli("session", "show", SESSION, "-o", "json").json["session"]["status"] == "stopped"


def test_a_transcript_larger_than_one_read_is_imported_over_several_calls_in_order(hooks):
    limit = 65_536  # the smallest session.hooks.transcript_read_bytes allows
    lines = []
    for turn in range(12):
        lines += [line(f"u{turn}", "user", f"prompt {turn}"), line(f"a{turn}", "assistant", f"{turn} " + "x" * 12_000)]
    hooks.transcript.write_text("\n".join(lines) + "\n")
    assert hooks.transcript.stat().st_size > 2 * limit
    env = {"COMPOZY_SESSION__HOOKS__TRANSCRIPT_READ_BYTES": str(limit)}
    hooks("SessionStart", **env)
    hooks("UserPromptSubmit", **env)
    first = hooks.rows()
    assert 0 < len([row for row in first if row[0] != "done"]) < len(lines)  # one read's worth, not all of it
    for _call in range(3):
        hooks("Stop", **env)
    rows = hooks.rows()
    messages = [(kind, turn) for kind, turn, _content in rows if kind != "done"]
    assert messages == [(kind, f"u{n}") for n in range(12) for kind in ("user_message", "assistant_message")]
    assert [turn for kind, turn, _content in rows if kind == "done"] == [f"u{n}" for n in range(12)]
    assert hooks.log() == []


def test_payloads_that_are_not_usable_are_logged_as_payload_invalid_never_as_internal(hooks):
    cases = {
        "nested 50,000 deep": b"[" * 50_000 + b"]" * 50_000,
        "a number too long to convert": b'{"session_id": "s", "n": ' + b"1" * 5_000 + b"}",
        "a NUL in the transcript path": json.dumps({"session_id": SESSION, "transcript_path": "/tmp/a\u0000b",
                                                    "cwd": str(hooks.cli.cwd)}).encode(),
        "a lone surrogate in the cwd": b'{"session_id": "s", "cwd": "/tmp/\\udc80"}',
    }
    for label, stdin in cases.items():
        hooks("Stop", stdin=stdin)
        assert hooks.log()[-1]["code"] == "hook.payload_invalid", label
    assert len(hooks.log()) == len(cases)
