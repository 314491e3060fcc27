"""A Claude Code folder built for the import tests, in the layout Claude Code writes (see
memory/importers/claude_code.py): two projects, one of whose checkouts is gone, auto-memory files in the four
types with frontmatter, an index line naming a missing file, a file holding a secret, a link pointing outside the
folder, and two transcripts with tool calls and a compaction summary. Written for these tests, not copied from a
real session."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from memory.importers.claude_code import sanitize

SESSION_A = "6b1d2c3e-0000-4000-8000-00000000000a"
SESSION_B = "6b1d2c3e-0000-4000-8000-00000000000b"
# A fake AWS key id: shaped like one so the content scanner refuses it.
FAKE_SECRET = "AKIA" + "Z7Q3" * 4


def memory_file(name: str, description: str, memory_type: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {memory_type}\n---\n\n{body}\n"


def line(kind: str, uuid: str, ts: str, cwd: Path, session: str, content: object, **extra: object) -> str:
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps({"type": kind, "uuid": uuid, "parentUuid": None, "timestamp": ts, "sessionId": session,
                       "version": "2.1.1", "cwd": str(cwd), "isSidechain": False, "userType": "external",
                       "message": {"role": role, "content": content}, **extra}) + "\n"


def transcript(cwd: Path, session: str, day: str, prompt: str, answer: str) -> str:
    u = session[-1]
    return "".join([
        json.dumps({"type": "summary", "summary": "earlier work", "leafUuid": f"{u}0000000-0000-4000-8000-1"}) + "\n",
        line("user", f"{u}0000001", f"{day}T09:00:00.000Z", cwd, session, prompt),
        line("assistant", f"{u}0000002", f"{day}T09:00:04.000Z", cwd, session,
             [{"type": "text", "text": "Reading the config first."},
              {"type": "tool_use", "id": f"toolu_{u}1", "name": "Read", "input": {"file_path": f"{cwd}/app.toml"}}]),
        line("user", f"{u}0000003", f"{day}T09:00:05.000Z", cwd, session,
             [{"type": "tool_result", "tool_use_id": f"toolu_{u}1", "content": "port = 8080"}]),
        line("user", f"{u}0000004", f"{day}T09:30:00.000Z", cwd, session,
             "This session is being continued from a previous conversation. Summary: config work.",
             isCompactSummary=True),
        line("assistant", f"{u}0000005", f"{day}T09:31:00.000Z", cwd, session, [{"type": "text", "text": answer}]),
        line("user", f"{u}0000006", f"{day}T09:40:00.000Z", cwd, session,
             "From now on, always run the linter before committing."),
        line("assistant", f"{u}0000007", f"{day}T09:40:05.000Z", cwd, session,
             [{"type": "text", "text": "Understood: the linter runs before every commit."}]),
    ])


@dataclass
class ClaudeFolder:
    root: Path  # the Claude Code folder (~/.claude)
    alpha: Path  # the checkout that exists
    gone: Path  # the checkout that no longer exists
    outside: Path  # a file outside the folder that a link points to

    @property
    def alpha_memory(self) -> Path:
        return self.root / "projects" / sanitize(str(self.alpha)) / "memory"


def build(tmp_path: Path) -> ClaudeFolder:
    alpha = tmp_path / "code" / "alpha-api"
    (alpha / ".git").mkdir(parents=True)
    gone = tmp_path / "code" / "retired"
    root = tmp_path / "dot-claude"
    outside = tmp_path / "outside" / "private.md"
    outside.parent.mkdir(parents=True)
    outside.write_text(memory_file("Private", "Must never be read", "user", "outside the Claude folder"))

    memory = root / "projects" / sanitize(str(alpha)) / "memory"
    memory.mkdir(parents=True)
    (memory / "user_role.md").write_text(memory_file(
        "Role", "The user is a backend engineer new to the frontend", "user",
        "Ten years of Go; explain frontend ideas through backend analogies."))
    (memory / "feedback_tests.md").write_text(memory_file(
        "Integration tests", "Integration tests hit a real database, never mocks", "feedback",
        "Integration tests must hit a real database.\n\n**Why:** mocked tests passed while a migration failed."))
    (memory / "project_freeze.md").write_text(memory_file(
        "Merge freeze", "Non-critical merges are frozen from 2026-03-05 for the mobile release", "project",
        "Merge freeze begins 2026-03-05 while mobile cuts the release branch."))
    (memory / "reference_dashboards.md").write_text(memory_file(
        "Latency dashboard", "Where the API latency dashboard lives", "reference",
        "grafana.internal/d/api-latency is what oncall watches for the checkout API."))
    (memory / "project_credentials.md").write_text(memory_file(
        "Deploy key", "The deploy credentials", "project", f"Use {FAKE_SECRET} for deploys."))
    os.symlink(outside, memory / "user_private.md")
    (memory / "MEMORY.md").write_text(
        "- [Role](user_role.md) — backend engineer\n"
        "- [Integration tests](feedback_tests.md) — real database\n"
        "- [Old notes](project_old_notes.md) — removed by hand\n")
    stamp = 1_767_225_600  # 2026-01-01T00:00:00Z: the files' own date, which the memories must keep
    for path in memory.iterdir():
        if not path.is_symlink():
            os.utime(path, (stamp, stamp))

    folder = memory.parent
    (folder / f"{SESSION_A}.jsonl").write_text(transcript(
        alpha, SESSION_A, "2026-02-02", "Move the API to port 8080.", "Done: the API listens on 8080 now."))
    (folder / f"{SESSION_B}.jsonl").write_text(transcript(
        alpha, SESSION_B, "2026-02-09", "Add a health endpoint.", "Fixed: /healthz answers 200."))

    gone_memory = root / "projects" / sanitize(str(gone)) / "memory"
    gone_memory.mkdir(parents=True)
    (gone_memory / "project_legacy.md").write_text(memory_file(
        "Legacy deploy", "The retired service deployed by hand", "project", "It deployed with a shell script."))
    (gone_memory / "feedback_commits.md").write_text(memory_file(
        "Commit style", "Commit messages say why, not what", "feedback", "Say why in every commit message."))
    return ClaudeFolder(root=root, alpha=alpha, gone=gone, outside=outside)


def snapshot_of(root: Path) -> dict[str, tuple[int, float]]:
    """Every path under the folder with its size and mtime: the import must leave it exactly so."""
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_size, info.st_mtime)
    return found
