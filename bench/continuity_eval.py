"""What a later session is given, end to end: conversations replayed through the session ledger, then questions
asked at the start of a new session, judged by answer containment within a prompt budget.

    .venv/bin/python bench/continuity_eval.py                        # ../shared/data/continuity-dev
    .venv/bin/python bench/continuity_eval.py --convs 0 --questions 50   # a quick smoke run

Input (read in place, never copied; its README defines the metric): `sessions.jsonl` lines `{conv, session, time,
speakers, turns: [{turn, role, text}]}` in order, and `questions.jsonl` lines `{conv, question, answer, category}`.
As the README says, both speakers are people: every turn is a user turn, with the speaker's name.

Replay, per conversation, in its own workspace of one scratch COMPOZY_HOME, through the services every surface
calls, with the task cluster inline (COMPOZY_Q_SYNC=1, what `compozy serve` runs after a request, run in the
request's process): for each session `session_start`, one `session_append` of its turns (kind user_message, the
speaker as the event's agent_name, the session's own time as every event's ts), `session_stop`. The stop's
on-commit work (the checkpoint update, the extractor's trigger, run and drain) runs as the cluster would run it.
Nothing else is called: no shortcut a live session would not take.

Questions: each at the start of a new session of its conversation's workspace (`session_start` with the question
as its query: the frozen section the agent is handed). Delivered at budget B: the normalised answer is a substring
of the normalised first B characters of that section (B = 2,000 and 8,000).

Baselines, in the same run, from the raw transcript (each turn `[session time] Speaker: text`):
- last_turns: the newest turns that fit in B, oldest first;
- raw_bm25: SQLite FTS5 over the turns, the OR of the question's quoted terms, best first while they fit;
- whole_transcript: every turn, no budget (the ceiling for answers that are verbatim in some turn).

Also: the section's size (p50/p95 characters and its parts), memories kept per conversation (curated files in the
workspace and in the global root after the replay), sessions replayed per second, session start (snapshot
assembly with recall) p50/p95.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

# ../shared/data/continuity-dev beside the checkout (a worktree sits one level deeper than the main checkout).
DEFAULT_DATA = next((parent / "shared" / "data" / "continuity-dev" for parent in Path(__file__).resolve().parents
                     if (parent / "shared" / "data" / "continuity-dev").is_dir()),
                    Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "continuity-dev")
BUDGETS = (2000, 8000)
WORD = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def delivered(answer: str, context: str, budget: int | None) -> bool:
    gold = normalise(answer)
    return bool(gold) and gold in normalise(context if budget is None else context[:budget])


def session_time(text: str) -> datetime:
    """"1:56 pm on 8 May, 2023" (the data's form), read as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(data: Path, convs: set[int] | None) -> tuple[list[dict], list[dict]]:
    def keep(conv: str) -> bool:
        return convs is None or int(conv.rsplit("-", 1)[-1]) in convs

    with (data / "sessions.jsonl").open() as handle:
        sessions = [s for s in map(json.loads, handle) if keep(s["conv"])]
    with (data / "questions.jsonl").open() as handle:
        questions = [q for q in map(json.loads, handle) if keep(q["conv"])]
    return sessions, questions


def raw_lines(sessions: list[dict]) -> list[str]:
    return [f"[{s['time']}] {turn['role']}: {turn['text']}" for s in sessions for turn in s["turns"]]


def fit(lines: list[str], budget: int) -> str:
    out: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget:
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def last_turns(lines: list[str], budget: int) -> str:
    kept = fit(list(reversed(lines)), budget).split("\n")
    return "\n".join(reversed(kept))


class RawBm25:
    """Plain bm25 over one conversation's raw turns (the README's baseline)."""

    def __init__(self, lines: list[str]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE turns USING fts5(text)")
        self.db.executemany("INSERT INTO turns(rowid, text) VALUES (?, ?)", list(enumerate(lines)))
        self.lines = lines

    def ranked(self, question: str) -> list[str]:
        terms = sorted(set(re.findall(r"\w+", question.lower())))
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rows = self.db.execute("SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns)", [match]).fetchall()
        return [self.lines[row[0]] for row in rows]


def section_parts(text: str) -> dict[str, int]:
    """Characters of each part of a frozen section: indexes, recall block, checkpoint, anything else."""
    parts: dict[str, int] = defaultdict(int)
    for match in re.finditer(r"<(compozy_(?!memory>)[a-z_]+)[^>]*>.*?</\1>", text, flags=re.S):
        tag = match.group(1)
        name = {"compozy_memory_index": "index", "compozy_checkpoint_summary": "checkpoint"}.get(tag, tag)
        if "recall" in tag:
            name = "recall"
        parts[name] += len(match.group(0))
    return dict(parts)


def replay(env: common.Env, sessions: list[dict], questions: list[dict]) -> dict:
    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.sessions import (
        SessionAppendInput,
        SessionIdInput,
        SessionStartInput,
        session_append,
        session_start,
        session_stop,
    )

    by_conv: dict[str, list[dict]] = defaultdict(list)
    for session in sessions:
        by_conv[session["conv"]].append(session)
    asked: dict[str, list[dict]] = defaultdict(list)
    for question in questions:
        asked[question["conv"]].append(question)

    rows: list[dict] = []  # one per question: category and delivered flags per context and budget
    sizes: list[int] = []
    parts: dict[str, list[int]] = defaultdict(list)
    start_seconds: list[float] = []
    replay_seconds = 0.0
    replayed = 0
    kept: dict[str, dict[str, int]] = {}
    for conv, conv_sessions in by_conv.items():
        directory = env.base / conv
        (directory / ".git").mkdir(parents=True)
        caller = Caller(origin=Origin.CLI, cwd=directory)
        common.log(f"{conv}: replaying {len(conv_sessions)} sessions")
        began = time.perf_counter()
        for session in conv_sessions:
            sid = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{conv}.{session['session']}")
            ts = session_time(session["time"]).isoformat().replace("+00:00", "Z")
            session_start(data=SessionStartInput.parse({"session_id": sid}), caller=caller)
            events = [{"kind": "user_message", "content": turn["text"], "turn_id": turn["turn"],
                       "agent_name": turn["role"], "ts": ts} for turn in session["turns"]]
            session_append(data=SessionAppendInput.parse({"session_id": sid, "events": events}), caller=caller)
            session_stop(data=SessionIdInput.parse({"session_id": sid}), caller=caller)
            replayed += 1
        replay_seconds += time.perf_counter() - began
        workspace_root = next(directory.glob(".compozy/memory"), None)
        kept[conv] = {
            "workspace_files": len([p for p in workspace_root.glob("*.md") if p.name != "MEMORY.md"])
            if workspace_root else 0,
            # The global root is shared by every conversation of the run: its count so far.
            "global_files_so_far": len([p for p in (env.home / "memory").glob("*.md") if p.name != "MEMORY.md"]),
        }
        lines = raw_lines(conv_sessions)
        bm25 = RawBm25(lines)
        common.log(f"{conv}: asking {len(asked[conv])} questions ({kept[conv]})")
        for number, question in enumerate(asked[conv]):
            started = time.perf_counter()
            result = session_start(data=SessionStartInput.parse(
                {"session_id": f"{conv}.q{number}", "query": question["question"]}), caller=caller)
            start_seconds.append(time.perf_counter() - started)
            text = result.snapshot.text
            sizes.append(len(text))
            for name, size in section_parts(text).items():
                parts[name].append(size)
            ranked = bm25.ranked(question["question"])
            answer = str(question["answer"])
            row = {"category": question["category"],
                   "whole_transcript": delivered(answer, "\n".join(lines), None),
                   "product_whole_section": delivered(answer, text, None)}
            for budget in BUDGETS:
                row[f"product@{budget}"] = delivered(answer, text, budget)
                row[f"raw_bm25@{budget}"] = delivered(answer, fit(ranked, budget), budget)
                row[f"last_turns@{budget}"] = delivered(answer, last_turns(lines, budget), budget)
            rows.append(row)
    return {"rows": rows, "sizes": sizes, "parts": parts, "start_seconds": start_seconds,
            "replay_seconds": replay_seconds, "replayed": replayed, "kept": kept}


def rates(rows: list[dict]) -> dict[str, float]:
    keys = [key for key in rows[0] if key != "category"] if rows else []
    return {key: round(sum(row[key] for row in rows) / len(rows), 4) for key in keys}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--convs", help="comma-separated conversation numbers (default: all)")
    parser.add_argument("--questions", type=int, help="at most this many questions per conversation")
    # The task cluster inline: what a stop queues (checkpoint, extractor run, drain) runs in this process, in order.
    os.environ["COMPOZY_Q_SYNC"] = "1"
    common.main(parser, measure, home="continuity")


def measure(env: common.Env, args: argparse.Namespace) -> dict[str, object]:
    convs = {int(part) for part in args.convs.split(",")} if args.convs else None
    sessions, questions = load(args.data, convs)
    if args.questions:
        per: dict[str, int] = defaultdict(int)
        limited = []
        for question in questions:
            if per[question["conv"]] < args.questions:
                per[question["conv"]] += 1
                limited.append(question)
        questions = limited
    began = time.perf_counter()
    measured = replay(env, sessions, questions)
    total = time.perf_counter() - began
    rows = measured["rows"]
    by_category: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_category[row["category"]].append(row)
    sizes = measured["sizes"]
    starts = common.timing_summary(measured["start_seconds"])
    return {
        "benchmark": "continuity",
        "machine": common.machine(),
        "data": str(args.data),
        "conversations": len(measured["kept"]),
        "sessions": measured["replayed"],
        "turns": sum(len(s["turns"]) for s in sessions),
        "questions": len(rows),
        "delivered": rates(rows),
        "delivered_by_category": {category: {"n": len(items), **rates(items)}
                                  for category, items in sorted(by_category.items())},
        "section_chars": {"p50": round(common.percentile(sizes, 0.5)), "p95": round(common.percentile(sizes, 0.95)),
                          "max": max(sizes)} if sizes else {},
        "section_part_chars_mean": {name: round(sum(v) / len(rows)) for name, v in sorted(measured["parts"].items())},
        "memories_kept": measured["kept"],
        "sessions_replayed_per_s": round(measured["replayed"] / measured["replay_seconds"], 2)
        if measured["replay_seconds"] else None,
        "session_start_with_query": common.p50_p95({"start": starts}, {"start": "assembly"}) | {"n": starts["n"]},
        "wall_s": round(total, 1),
    }


if __name__ == "__main__":
    main()
