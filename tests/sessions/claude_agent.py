"""One Claude Code session driven as Claude Code drives it (the real `compozy hook claude-code <event>` process,
a recorded payload on stdin, a transcript on disk), shared by the hook tests."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli

DATA = Path(__file__).resolve().parent / "data" / "claude_code"
SESSION = json.loads((DATA / "SessionStart.json").read_text())["session_id"]


class Agent:
    """One Claude Code session in a workspace: its transcript file and its hook calls."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.transcript = cli.cwd.parent / "transcript.jsonl"

    def write_transcript(self, *phases: str) -> None:
        text = "".join((DATA / f"transcript_{phase}.jsonl").read_text() for phase in phases)
        self.transcript.write_text(text.replace("__CWD__", str(self.cli.cwd)))

    def payload(self, event: str, **changes: object) -> bytes:
        payload = json.loads((DATA / f"{event}.json").read_text())
        payload.update(cwd=str(self.cli.cwd), transcript_path=str(self.transcript), **changes)
        return json.dumps(payload).encode()

    def hook(self, event: str, stdin: bytes | None = None, **env: str):
        result = self.cli("hook", "claude-code", event, input=self.payload(event) if stdin is None else stdin, **env)
        assert result.code == 0, result.stderr
        return result

    def events(self) -> list[dict]:
        listed = self.cli("session", "events", SESSION, "-o", "json")
        assert listed.code == 0, listed.stderr
        return listed.json["events"]

    def log(self) -> list[dict]:
        path = self.cli.home / "logs" / "hooks.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
