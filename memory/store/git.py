"""The system's `git`, run as a subprocess in one repository (`memory sync` over `$COMPOZY_HOME/memory`).

Compozy never handles credentials: git asks the person's own credential helper or SSH agent, never a terminal
(`GIT_TERMINAL_PROMPT=0`, and SSH in batch mode, so a sync from the task cluster fails instead of hanging), and
nothing git prints is passed on before a URL's user and password are cut out of it (`redact`).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# `scheme://user:password@host` → `scheme://host`: git repeats a remote URL in its errors, credentials included.
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)


def redact(text: str) -> str:
    return _URL_USERINFO.sub(r"\1", text)


@dataclass(frozen=True)
class GitResult:
    code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_SSH_COMMAND": env.get("GIT_SSH_COMMAND") or "ssh -o BatchMode=yes",
        # A rebase or merge must never open an editor in a service.
        "GIT_EDITOR": "true",
        "GIT_MERGE_AUTOEDIT": "no",
        "LC_ALL": "C",
    })
    return env


def run(repo: Path, *args: str, stdin: bytes | None = None) -> GitResult:
    """Run `git -C repo args…`; never raises on git's own failure (the caller reads `code`)."""
    completed = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=_env(),
                               check=False)
    return GitResult(completed.returncode, redact(completed.stdout.decode("utf-8", "replace")),
                     redact(completed.stderr.decode("utf-8", "replace")))


def is_repository(root: Path) -> bool:
    """Whether `root` is itself a git work tree's top (not merely inside another repository)."""
    return (root / ".git").exists()
