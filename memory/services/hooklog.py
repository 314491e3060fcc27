"""The failure log of agent hooks: `$COMPOZY_HOME/logs/hooks.log`, one JSON object per line.

A hook runs inside someone else's agent and must never break it, so its failures are not printed: they are
appended here with a stable code. Plain Python on purpose (no Django, no database): it must work when those are
what failed.

Codes: `hook.startup` (the command could not start), `hook.payload_invalid` (stdin was not a usable hook
payload), `hook.event_unknown` (not an event the adapter handles), `hook.transcript_unreadable` (the transcript
could not be read; the rest of the hook still ran), `hook.transcript_line_invalid` (one transcript line was
skipped, or imported without a bad field; logged once, with its byte offset and why, never its text),
`hook.service_unanswered` (the running service accepted the forwarded hook but gave no answer in time; it is not
run again in-process), `hook.internal` (anything else: a bug), or the `memory.*` code of a service error.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from compozy.home import PRIVATE_FILE, private_dir

LINE_INVALID = "hook.transcript_line_invalid"


def log_path() -> Path:
    home = Path(os.environ.get("COMPOZY_HOME") or Path.home() / ".compozy").expanduser()
    return home / "logs" / "hooks.log"


def log_failure(*, code: str, message: str, client: str = "", event: str = "", session_id: str = "") -> None:
    """Append one failure line; never raises (a hook that cannot even log still exits quietly)."""
    entry = {"ts": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "code": code, "client": client,
             "event": event, "session_id": session_id, "message": message[:2000]}
    try:
        path = log_path()
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, PRIVATE_FILE)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    except OSError:
        pass
