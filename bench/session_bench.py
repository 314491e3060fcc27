"""The session ledger at N events per session (default 1,000 and 10,000): appends beside a bare SQLite floor, a
checkpoint update with the local provider, and pressure compaction of the whole span.

    .venv/bin/python bench/session_bench.py
    .venv/bin/python bench/session_bench.py --sizes 1000 --batch 50

Each size runs in its own worker process, one after the other, with its own fresh COMPOZY_HOME and workspace, so
its peak RSS is that size's alone.

The transcript (not timed to build) is N rows of complete turns: user_message, assistant_message, tool_call,
tool_result, done, each turn with its own turn id, each row with an external key as a transcript importer sends
it, texts of a few sentences with paths, versions and commands so the local rules have something to keep.

  append            N rows through `session_append(data=SessionAppendInput.parse(...))` in batches of --batch rows
                    (input parsing included): rows/s
  append_floor      the same rows into a bare sqlite3 table of the same shape (the same unique indexes on
                    (session, seq) and (session, external_key)), one transaction per batch, with the product's
                    durability (WAL, synchronous=NORMAL), on the same filesystem: rows/s
  checkpoint        `checkpoint_after_stop` on the N-row session: the bounded projection (newest 256 messages),
                    the local provider, the controller write; --repeats runs, each after 5 more rows, so each one
                    is a real update (the first is the add)
  compaction        `session_compact` over a second N-row session with every turn complete: summary into the
                    checkpoint, durable coverage commit, archive of N rows; one run per size (a rerun is a no-op)

Targets (at the largest size): appends within 3x the floor; checkpoint update and compaction each under 1 s;
peak RSS flat (the largest size within 25% of the smallest).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_APPEND_RATIO = 3.0
TARGET_MS = 1000.0
TARGET_RSS_GROWTH = 1.25
KINDS = ("user_message", "assistant_message", "tool_call", "tool_result", "done")


def transcript(count: int, seed: int, session_id: str) -> list[dict[str, object]]:
    words = common.Words(seed)
    rows: list[dict[str, object]] = []
    turn = 0
    while len(rows) < count:
        turn += 1
        topic = " ".join(words.words(3))
        texts = {
            "user_message": f"Please migrate the {topic} module to asyncio and keep the retry policy of v{turn}.0.1.",
            "assistant_message": f"We decided to use a task group for {topic}. I updated src/{words.word()}.py "
                                 f"and added tests in tests/test_{words.word()}.py; all tests pass.",
            "tool_call": "Bash",
            "tool_result": f"{turn * 3} passed in 0.{turn % 10}s\n" + " ".join(words.words(20)),
            "done": "",
        }
        for kind in KINDS:
            if len(rows) == count:
                break
            row: dict[str, object] = {"kind": kind, "content": texts[kind], "turn_id": f"{session_id}-t{turn}",
                                      "external_key": f"{session_id}-{len(rows)}"}
            if kind == "tool_call":
                row["data"] = {"name": "Bash", "input": {"command": f"pytest -q tests/test_{topic.split()[0]}.py"}}
            rows.append(row)
    return rows


def floor_appends(scratch: Path, rows: list[dict[str, object]], batch: int) -> float:
    """Seconds to insert the rows into a bare table of the same shape, one transaction per batch."""
    path = scratch / "floor.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT, workspace_id TEXT, seq INTEGER, "
               "turn_id TEXT, kind TEXT, agent_name TEXT, content TEXT, data TEXT, ts TEXT, archived INTEGER, "
               "external_key TEXT)")
    db.execute("CREATE UNIQUE INDEX events_seq ON events (session_id, seq)")
    db.execute("CREATE UNIQUE INDEX events_key ON events (session_id, external_key) WHERE external_key != ''")
    started = time.perf_counter()
    for offset in range(0, len(rows), batch):
        chunk = rows[offset:offset + batch]
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO events (session_id, workspace_id, seq, turn_id, kind, agent_name, content, data, ts, "
            "archived, external_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            [("floor", "W", offset + index + 1, row["turn_id"], row["kind"], "", row["content"],
              json.dumps(row.get("data") or {}), "2026-01-01 00:00:00", row["external_key"])
             for index, row in enumerate(chunk)])
        db.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed


def worker(env: common.Env, count: int, seed: int, batch: int, repeats: int) -> dict[str, object]:
    from memory.domain.enums import Origin
    from memory.models import SessionEvent
    from memory.services import checkpoints, sessions
    from memory.services.inputs import Caller

    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    rss_at_start = common.peak_rss_mb()

    def start(session_id: str) -> None:
        sessions.session_start(data=sessions.SessionStartInput.parse({"session_id": session_id,
                                                                      "agent_name": "bench"}), caller=caller)

    def append(session_id: str, rows: list[dict[str, object]]) -> float:
        started = time.perf_counter()
        for offset in range(0, len(rows), batch):
            data = sessions.SessionAppendInput.parse({"session_id": session_id, "events": rows[offset:offset + batch]})
            sessions.session_append(data=data, caller=caller)
        return time.perf_counter() - started

    # Appends, and their floor.
    rows = transcript(count, seed, "ledger")
    start("ledger")
    append_s = append("ledger", rows)
    seqs = list(SessionEvent.objects.filter(session_id="ledger").order_by("seq").values_list("seq", flat=True))
    floor_s = floor_appends(env.scratch, rows, batch)

    # Checkpoint updates from the N-row session (the first run is the add).
    checkpoint_ms: list[float] = []
    reasons: list[str] = []
    for run in range(repeats):
        if run:
            append("ledger", transcript(5, seed + run, f"more{run}"))
        started = time.perf_counter()
        outcome = checkpoints.checkpoint_after_stop(session_id="ledger")
        checkpoint_ms.append((time.perf_counter() - started) * 1000)
        reasons.append(outcome.reason)

    # Compaction of a whole N-row span of complete turns.
    span_rows = transcript(count - count % len(KINDS) or count, seed + 99, "span")
    start("span")
    append("span", span_rows)
    started = time.perf_counter()
    compaction = sessions.session_compact(data=sessions.SessionCompactInput.parse({"session_id": "span"}),
                                          caller=caller)
    compaction_ms = (time.perf_counter() - started) * 1000
    rerun = sessions.session_compact(data=sessions.SessionCompactInput.parse({"session_id": "span"}), caller=caller)
    archived = SessionEvent.objects.filter(session_id="span", archived=True).count()

    checks = {
        "seq_gap_free": seqs == list(range(1, count + 1)),
        "checkpoint_updates_landed": all(reason == "updated" for reason in reasons),
        "compaction_covered_the_span": compaction.reason == "compacted" and archived == len(span_rows),
        "rerun_did_no_work": rerun.reason == "nothing_to_compact",
    }
    return {
        "events": count,
        "batch": batch,
        "append": {"seconds": round(append_s, 4), "events_per_s": round(count / append_s, 1)},
        "append_floor": {"seconds": round(floor_s, 4), "events_per_s": round(count / floor_s, 1)},
        "append_ratio_to_floor": round(append_s / floor_s, 2),
        "checkpoint_update_ms": {"runs": [round(ms, 1) for ms in checkpoint_ms],
                                 "median": round(statistics.median(checkpoint_ms), 1),
                                 "max": round(max(checkpoint_ms), 1)},
        "compaction_ms": round(compaction_ms, 1),
        "compaction_rows_archived": archived,
        "peak_rss_mb": {"at_start": rss_at_start, "at_end": common.peak_rss_mb()},
        "checks": checks,
        "all_checks_passed": all(checks.values()),
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated N (events per session)")
    parser.add_argument("--batch", type=int, default=100, help="events per append call (and per floor transaction)")
    parser.add_argument("--repeats", type=int, default=5, help="timed checkpoint updates per size")
    parser.add_argument("--seed", type=int, default=20241130)
    parser.add_argument("--worker", type=int, metavar="N", help=argparse.SUPPRESS)
    common.main(parser, coordinate, worker=lambda args: common.worker_process(
        f"session-{args.worker}", lambda env: worker(env, args.worker, args.seed, args.batch, args.repeats)))


def coordinate(_env: None, args: argparse.Namespace) -> dict[str, object]:
    sizes = sorted(common.parse_sizes(args.sizes))
    results = common.run_size_workers(__file__, sizes, ["--seed", str(args.seed), "--batch", str(args.batch),
                                                        "--repeats", str(args.repeats)], None)
    largest, smallest = results[str(sizes[-1])], results[str(sizes[0])]
    rss = {str(size): results[str(size)]["peak_rss_mb"]["at_end"] for size in sizes}
    return {
        "benchmark": "session",
        "machine": common.machine(),
        "sizes": results,
        "summary": {str(size): {
            "append_events_per_s": results[str(size)]["append"]["events_per_s"],
            "append_floor_events_per_s": results[str(size)]["append_floor"]["events_per_s"],
            "append_ratio_to_floor": results[str(size)]["append_ratio_to_floor"],
            "checkpoint_update_median_ms": results[str(size)]["checkpoint_update_ms"]["median"],
            "compaction_ms": results[str(size)]["compaction_ms"],
            "peak_rss_mb": rss[str(size)],
            "all_checks_passed": results[str(size)]["all_checks_passed"],
        } for size in sizes},
        "targets": {
            "at_events": sizes[-1],
            "append_within_3x_floor": largest["append_ratio_to_floor"] <= TARGET_APPEND_RATIO,
            "checkpoint_update_under_1s": largest["checkpoint_update_ms"]["max"] < TARGET_MS,
            "compaction_under_1s": largest["compaction_ms"] < TARGET_MS,
            "peak_rss_flat": rss[str(sizes[-1])] <= rss[str(sizes[0])] * TARGET_RSS_GROWTH,
            "rss_growth": round(rss[str(sizes[-1])] / rss[str(sizes[0])], 3),
            "smallest_size": smallest["events"],
        },
    }


if __name__ == "__main__":
    main()
