"""Memories know when: a session replayed through `compozy session` with its own times (`ts` a month before the
extractor runs) gives memories created at that session's time, with their relative dates resolved against it (issue 26
item 2). The task cluster runs inline (COMPOZY_Q_SYNC=1, what `compozy serve` runs after the request)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

SYNC = {"COMPOZY_Q_SYNC": "1"}


def test_a_memory_extracted_from_a_month_old_session_is_dated_by_it_and_says_the_resolved_date(cli):
    said = (datetime.now(UTC) - timedelta(days=31)).replace(hour=15, minute=4, second=0, microsecond=0)
    day_before = said - timedelta(days=1)
    ts = said.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert cli("session", "start", "--session", "sess-dated", **SYNC).code == 0
    rows = [{"kind": "user_message", "content": "We switched the staging database to Postgres 16 yesterday.",
             "ts": ts, "turn_id": "t1"},
            {"kind": "assistant_message", "content": "Noted.", "ts": ts, "turn_id": "t1"}]
    appended = cli("session", "append", "sess-dated", "--jsonl", "-",
                   input="\n".join(json.dumps(row) for row in rows).encode(), **SYNC)
    assert appended.code == 0, appended.stderr
    assert cli("session", "stop", "sess-dated", **SYNC).code == 0
    listed = cli("memory", "list", "-o", "json")
    assert listed.code == 0, listed.stderr
    [memory] = [item for item in listed.json["memories"] if "staging" in item["filename"]]
    shown = cli("memory", "show", memory["filename"], "--scope", memory["scope"])
    assert shown.code == 0, shown.stderr
    resolved = f"yesterday ({day_before.day} {day_before.strftime('%B')} {day_before.year})"
    assert resolved in shown.stdout, shown.stdout
    # Created when it was said in the session, not when the run read it a month later; updated is the write's.
    when = said.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert re.search(rf"created: +{when}\b", shown.stdout), shown.stdout
    assert memory["updated_at"] > ts, memory  # the write's time: recall's recency is when memory changed
