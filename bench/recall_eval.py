"""Recall quality of the real pipeline on a conversational-memory dataset, beside a plain-bm25 floor.

    .venv/bin/python bench/recall_eval.py                                  # ../shared/data/recall-dev
    .venv/bin/python bench/recall_eval.py --data /path/to/dataset --limit-conversations 2

Input (read in place, never copied): `turns.jsonl` lines `{conv, turn, role, text, time}` and `questions.jsonl`
lines `{conv, question, evidence: [turn ids], category}`. Turn ids (and sessions) may be any JSON value: strings
as in the dev sets, numbers as in `bench/data/recall-tech`; they are compared by their JSON text.

Method: each conversation becomes its own workspace. Each turn becomes one memory file (type `project`, name
"<speaker>, turn <id>", description "<speaker> on <date>", body the turn's text) written into the workspace's
memory root and taken in by `catalog_reindex`, so every document goes through the real store and catalog as a
hand edit with origin `file` (operator writes would run the controller's duplicate rules over a chat log, which is
not what is measured here). Its provenance is what a capture of the conversation would record: the session it was
said in (`source_sessions`: the turn's `session`, or its `time` when the data has no sessions) and when it was
recorded (the session's time plus one second per earlier turn of the session, so the turns keep their order).
Each question runs through the real `memory_search` service, top 10, in its conversation's workspace. A question
is a hit at k when any evidence turn is among the first k winners.

Floor, in the same run: plain SQLite FTS5 (`porter unicode61 remove_diacritics 2`, bm25, the same three columns
of the same documents) queried with the question's non-stopword tokens quoted and OR-joined.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import sqlite3
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "recall-dev"
KS = (1, 5, 10)
UNKNOWN_TIME = datetime(2000, 1, 1, tzinfo=UTC)  # a turn whose time does not parse is recorded from here on


def turn_key(value: object) -> str:
    """A turn id of any JSON type as one string: `"D1:3"` stays `D1:3`, `7` becomes `7`."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def load(data: Path, limit: int | None) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    turns: dict[str, list[dict]] = defaultdict(list)
    questions: dict[str, list[dict]] = defaultdict(list)
    with (data / "turns.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            row["turn"] = turn_key(row["turn"])
            turns[turn_key(row["conv"])].append(row)
    with (data / "questions.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            row["evidence"] = [turn_key(turn) for turn in row["evidence"]]
            questions[turn_key(row["conv"])].append(row)
    convs = sorted(turns)[:limit] if limit else sorted(turns)
    return {c: turns[c] for c in convs}, {c: questions.get(c, []) for c in convs}


def parse_time(text: str) -> datetime | None:
    """`1:56 pm on 8 May, 2023` → a UTC datetime (None when the format differs)."""
    for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), pattern).replace(tzinfo=UTC)
        except (ValueError, AttributeError):
            continue
    return None


def slug(turn: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", turn.lower()).strip("_")


def document(row: dict) -> tuple[str, str, str, str, datetime | None]:
    when = parse_time(row.get("time", ""))
    day = when.strftime("%d %B %Y") if when else row.get("time", "")
    name = f"{row['role']}, turn {row['turn']}"
    description = f"{row['role']} on {day}"
    return f"project_turn_{slug(row['turn'])}.md", name, description, row["text"].strip() or "(empty)", when


def metrics(ranks: list[tuple[str, int | None]]) -> dict[str, dict[str, float]]:
    """ranks: (category, 0-based rank of the first evidence hit or None)."""
    groups: dict[str, list[int | None]] = defaultdict(list)
    for category, rank in ranks:
        groups[category].append(rank)
        groups["overall"].append(rank)
    out = {}
    for category, values in sorted(groups.items()):
        n = len(values)
        out[category] = {"questions": n}
        for k in KS:
            out[category][f"recall@{k}"] = round(sum(1 for r in values if r is not None and r < k) / n, 4)
        out[category]["mrr@10"] = round(sum(1 / (r + 1) for r in values if r is not None and r < 10) / n, 4)
    return out


def floor_ranks(docs: list[tuple[str, str, str, str]], questions: list[dict], stopwords: frozenset[str],
                words) -> tuple[list[tuple[str, int | None]], list[float]]:  # noqa: ANN001
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE f USING fts5(turn UNINDEXED, name, description, body, "
                       "tokenize='porter unicode61 remove_diacritics 2')")
    connection.executemany("INSERT INTO f VALUES (?, ?, ?, ?)", docs)
    ranks, seconds = [], []
    for question in questions:
        tokens = list(dict.fromkeys(t for t in words(question["question"]) if t not in stopwords and len(t) >= 2))
        expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        started = time.perf_counter()
        rows = connection.execute("SELECT turn FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10",
                                  (expression,)).fetchall() if expression else []
        seconds.append(time.perf_counter() - started)
        ranks.append((question["category"], first_hit([r[0] for r in rows], question["evidence"])))
    return ranks, seconds


def first_hit(turn_ids: list[str], evidence: list[str]) -> int | None:
    wanted = set(evidence)
    for index, turn in enumerate(turn_ids):
        if turn in wanted:
            return index
    return None


def index_conversation(env: common.Env, conv: str, rows: list[dict]):  # noqa: ANN201
    """Write one conversation's turns as memory files into a workspace of its own and reindex it. Returns the
    caller to search as, {filename: turn id}, and the floor's documents."""
    from memory.domain.document import render_document
    from memory.domain.enums import MemoryType, Origin, Scope
    from memory.domain.models import Frontmatter, Provenance, ScopeRef, format_timestamp
    from memory.services.catalog import ReindexInput, catalog_reindex
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    workspace = env.base / f"ws-{conv}"
    (workspace / ".git").mkdir(parents=True)
    caller = Caller(origin=Origin.CLI, cwd=workspace)
    resolved = resolve(Selector(), caller, create_workspace=True)
    root = resolved.root(ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id))
    root.mkdir(parents=True, exist_ok=True)
    by_file: dict[str, str] = {}
    floor_docs = []
    said_before: dict[str, int] = defaultdict(int)
    for row in rows:
        filename, name, description, body, when = document(row)
        session = turn_key(row.get("session") or row.get("time") or "")
        stamp = format_timestamp((when or UNKNOWN_TIME) + timedelta(seconds=said_before[session]))
        said_before[session] += 1
        provenance = Provenance(source_sessions=[f"{conv}/{session}"], created_at=stamp, updated_at=stamp)
        front = Frontmatter(name=name, description=description, type=MemoryType.PROJECT, scope=Scope.WORKSPACE,
                            provenance=provenance)
        (root / filename).write_text(render_document(front, body), "utf-8")
        by_file[filename] = row["turn"]
        floor_docs.append((row["turn"], name, description, body))
    report = catalog_reindex(data=ReindexInput.parse({}), caller=caller)
    common.log(f"{conv}: {len(rows)} turns indexed ({report.indexed} rows)")
    return caller, by_file, floor_docs


_ASKED = itertools.count(1)


def ask(caller, by_file: dict[str, str], question: dict,  # noqa: ANN001
        profiler=None) -> tuple[tuple[str, int | None], float, float, float]:  # noqa: ANN001
    """One question through the real memory_search: ((category, rank of the first evidence hit), seconds, CPU
    seconds of this thread, CPU seconds of the process). With a profiler, only the memory_search call runs under
    it."""
    from memory.services.recall import SearchInput, memory_search

    if profiler is not None:
        profiler.enable()
    started, cpu_started, process_started = time.perf_counter(), time.thread_time(), time.process_time()
    # Each question is asked as a session of its own: the questions are independent tasks, and recall's signals
    # move once per session (a session repeating a search raises nothing).
    asking = dataclasses.replace(caller, session_id=f"question-{next(_ASKED)}")
    result = memory_search(data=SearchInput.parse({"query": question["question"], "top_k": 10}), caller=asking)
    seconds, cpu_seconds = time.perf_counter() - started, time.thread_time() - cpu_started
    process_seconds = time.process_time() - process_started
    if profiler is not None:
        profiler.disable()
    ids = [by_file.get(hit.memory.filename, "") for hit in result.results if hit.shadowed_by is None]
    return (question["category"], first_hit(ids, question["evidence"])), seconds, cpu_seconds, process_seconds


def run(env: common.Env, data: Path, limit: int | None, profile: str | None = None) -> dict[str, object]:
    from memory.domain.text import STOPWORDS, words

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()

    turns, questions = load(data, limit)
    product: list[tuple[str, int | None]] = []
    floor: list[tuple[str, int | None]] = []
    product_s: list[float] = []
    product_cpu_s: list[float] = []
    product_process_cpu_s: list[float] = []
    floor_s: list[float] = []
    per_conversation: dict[str, dict[str, float]] = {}
    for conv, rows in turns.items():
        caller, by_file, floor_docs = index_conversation(env, conv, rows)
        for question in questions[conv]:
            rank, seconds, cpu_seconds, process_seconds = ask(caller, by_file, question, profiler)
            product.append(rank)
            product_s.append(seconds)
            product_cpu_s.append(cpu_seconds)
            product_process_cpu_s.append(process_seconds)
        ranks, seconds = floor_ranks(floor_docs, questions[conv], STOPWORDS, words)
        floor.extend(ranks)
        floor_s.extend(seconds)
        if ranks:
            asked = len(ranks)
            per_conversation[conv] = {
                "questions": asked,
                "product_recall@5": metrics(product[-asked:])["overall"]["recall@5"],
                "floor_recall@5": metrics(ranks)["overall"]["recall@5"],
            }

    if profiler is not None:
        common.dump_profile(profiler, profile, "the memory_search calls")
    product_metrics = metrics(product)
    floor_metrics = metrics(floor)
    return {
        "benchmark": "recall_eval",
        "machine": common.machine(),
        "data": str(data),
        "conversations": len(turns),
        "turns": sum(len(rows) for rows in turns.values()),
        "questions": len(product),
        "product": product_metrics,
        "floor_plain_bm25_or": floor_metrics,
        "delta_recall@5_points": round(100 * (product_metrics["overall"]["recall@5"]
                                              - floor_metrics["overall"]["recall@5"]), 1),
        # No category may fall below its floor: the same delta category by category.
        "delta_recall@5_points_by_category": {
            category: round(100 * (figures["recall@5"] - floor_metrics[category]["recall@5"]), 1)
            for category, figures in product_metrics.items()},
        # The same delta conversation by conversation: one conversation's quirks should not carry the total.
        "per_conversation": per_conversation,
        "profiled": bool(profile),
        "latency_ms": {
            "product": common.latency_summary(product_s, counting="searches"),
            # The CPU time of the searching thread: on a shared machine, wall time also counts the time the
            # process waited for a core; this does not (it still counts SQLite's work, done in this thread).
            "product_cpu": common.latency_summary(product_cpu_s, counting="searches"),
            # The CPU time of the whole process: recall runs part of a question in a second thread
            # (memory.recall.side_thread), whose time the searching thread's CPU leaves out.
            "product_process_cpu": common.latency_summary(product_process_cpu_s, counting="searches"),
            "floor": common.latency_summary(floor_s, counting="searches"),
        },
        "targets": {"delta_recall@5_points_min": 10.0, "p95_ms_max": 20.0},
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-conversations", type=int)
    parser.add_argument("--profile", metavar="PATH", help="cProfile the memory_search calls into PATH")
    common.main(parser, lambda env, args: run(env, args.data, args.limit_conversations, args.profile),
                home="recall")


if __name__ == "__main__":
    main()
