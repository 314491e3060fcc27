"""Extractor quality and speed on a labelled conversational dataset, through the real product path.

    .venv/bin/python bench/extract_eval.py                       # ../shared/data/extract-dev, dev 0-2, check 3-4
    .venv/bin/python bench/extract_eval.py --speed-turns 200     # a quick smoke run

Input (read in place, never copied): `sessions.jsonl` lines `{conv, session, time, speakers, turns: [{turn, role,
text}]}` and `facts.jsonl` lines `{conv, session, about, fact, source_turns: [turn ids]}`. As the data's README
says, every turn is treated as a user turn (both speakers are people).

Quality: each session's turns go through `extract_turns` (the configured provider, the strict parser, the policy,
the inbox) and then `drain_inbox` (every staged candidate submitted through the controller) in a scratch home. The
candidates measured are the lines actually staged. Metric (the README's, turn-level so wording does not matter):
- a candidate is supported when the turns it cites as evidence include a source turn of some fact; precision is
  supported candidates / candidates;
- a fact is found when some candidate cites one of its source turns; recall is found facts / facts.
Beside it, in the same run: the one-candidate-per-turn floor (recall 1.0) and a single first-person regular
expression (one candidate per turn that has a sentence starting with "I" or "My").
The conversations are split into the development half (`--dev`, default 0-2, what the rules were written
against) and the check half (the rest); both are reported, and the targets apply to each; `all` is both together
(the README's figures).

What the rules missed: each fact not found is classified by why its source turn proposed nothing (the reason of
its closest sentence, see extract_rules.miss_reason), counted by kind; with `--examples` a few facts of each kind
are printed too. Per-rule precision comes from the local rules run over the same turns.

Speed: the first `--speed-turns` turns, each one as its own run (one `extract_turns` with its staged file, then one
`drain_inbox` when it staged one, as a live session's trigger runs them: `extractor_run` queues a drain only after
a run that staged a file) in a fresh home: turns/s, the per-turn latency distribution and the thread CPU per turn.
Beside it, interleaved turn by turn: the floor doing the same durable work bare, and the rules alone. Until session
5 the speed run also drained after every turn that staged nothing; that drain is still run (untimed in the main
figure) and timed, so `draining_after_every_turn` prints the old figure beside the new one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "extract-dev"
TARGETS = {"precision_min": 0.7, "recall_min": 0.35, "turns_per_second_min": 200}
FIRST_PERSON_SENTENCE = re.compile(r"(?:^|[.!?]\s+)(?:I|My)\b")
EXAMPLES_PER_KIND = 3


def load(data: Path) -> tuple[list[dict], list[dict]]:
    with (data / "sessions.jsonl").open() as handle:
        sessions = [json.loads(line) for line in handle]
    with (data / "facts.jsonl").open() as handle:
        facts = [json.loads(line) for line in handle]
    return sessions, facts


def conv_number(conv: str) -> int:
    return int(conv.rsplit("-", 1)[-1])


def session_id(session: dict) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{session['conv']}.{session['session']}")


def as_turns(session: dict):  # noqa: ANN201 - memory.domain.extraction.Turn, imported after Django starts
    from memory.domain.extraction import Turn

    return [Turn(seq=index, role="user", text=turn["text"]) for index, turn in enumerate(session["turns"], start=1)]


def scores(cited: list[tuple[str, str]], facts: list[dict], source_turns: set[tuple[str, str]]) -> dict[str, object]:
    """cited: one (conv, turn id) per candidate (a candidate citing several turns is listed once per turn by the
    caller through `any`)."""
    supported = sum(1 for key in cited if key in source_turns)
    cited_set = set(cited)
    found = sum(1 for fact in facts if any((fact["conv"], t) in cited_set for t in fact["source_turns"]))
    return {"candidates": len(cited), "supported": supported, "facts": len(facts), "found": found,
            "precision": round(supported / len(cited), 4) if cited else 0.0,
            "recall": round(found / len(facts), 4) if facts else 0.0}


def quality(env: common.Env, sessions: list[dict], facts: list[dict], dev: set[int], examples: bool) -> dict:
    from compozy.config import load_config
    from memory.domain.extraction import StagedCandidate
    from memory.extractor.drain import drain_inbox
    from memory.extractor.extraction import SessionSource, extract_turns
    from memory.providers import extract_rules
    from memory.store.roots import global_root

    config = load_config()
    workspace_id = workspace_of(env)
    source_turns = {(f["conv"], t) for f in facts for t in f["source_turns"]}
    halves = {"dev": [s for s in sessions if conv_number(s["conv"]) in dev],
              "check": [s for s in sessions if conv_number(s["conv"]) not in dev]}
    result: dict[str, object] = {}
    drained_ops: Counter[str] = Counter()
    # Both halves together: the data README's figures (its floor, precision 0.409, is over every conversation).
    every: dict[str, list[tuple[str, str]]] = {"product": [], "floor": [], "regex": []}
    every_missed: Counter[str] = Counter()
    for half, chosen in halves.items():
        convs = {s["conv"] for s in chosen}
        half_facts = [f for f in facts if f["conv"] in convs]
        cited: list[tuple[str, str]] = []
        floor: list[tuple[str, str]] = []
        regex: list[tuple[str, str]] = []
        per_rule: dict[str, Counter[str]] = defaultdict(Counter)
        for session in chosen:
            turn_ids = {index: turn["turn"] for index, turn in enumerate(session["turns"], start=1)}
            turns = as_turns(session)
            sid = session_id(session)
            outcome = extract_turns(source=SessionSource(sid, sid, workspace_id), turns=turns, context=[],
                                    config=config)
            if outcome.staged_file:
                staged = [StagedCandidate.model_validate_json(line) for line in
                          (global_root() / outcome.staged_file).read_text().splitlines() if line.strip()]
                for line in staged:
                    keys = [(session["conv"], turn_ids[seq]) for seq in line.memory.evidence]
                    # A candidate citing several turns is supported when any is a source turn: count it once.
                    hit = next((key for key in keys if key in source_turns), keys[0])
                    cited.append(hit)
            report = drain_inbox(config)
            drained_ops.update(report.ops)
            if report.failures:
                raise SystemExit(f"drain failures in a clean run: {report.failures}")
            for turn in session["turns"]:
                floor.append((session["conv"], turn["turn"]))
                if FIRST_PERSON_SENTENCE.search(turn["text"]):
                    regex.append((session["conv"], turn["turn"]))
            for proposal in extract_rules.extract(turns):
                key = (session["conv"], turn_ids[proposal.evidence[0]])
                per_rule[proposal.kind]["candidates"] += 1
                per_rule[proposal.kind]["supported"] += key in source_turns
        cited_set = set(cited)
        missed = [f for f in half_facts if not any((f["conv"], t) in cited_set for t in f["source_turns"])]
        text_of = {(s["conv"], t["turn"]): t["text"] for s in chosen for t in s["turns"]}
        miss_kinds: Counter[str] = Counter()
        miss_examples: dict[str, list[str]] = defaultdict(list)
        for fact in missed:
            reasons = [extract_rules.miss_reason(text_of[(fact["conv"], t)]) for t in fact["source_turns"]
                       if (fact["conv"], t) in text_of]
            kind = min(reasons, key=extract_rules.MISS_REASONS.index) if reasons else "empty"
            miss_kinds[kind] += 1
            if examples and len(miss_examples[kind]) < EXAMPLES_PER_KIND:
                miss_examples[kind].append(fact["fact"][:100])
        every["product"] += cited
        every["floor"] += floor
        every["regex"] += regex
        every_missed.update(miss_kinds)
        result[half] = {
            "conversations": sorted(convs),
            "product": scores(cited, half_facts, source_turns),
            "floor_one_candidate_per_turn": scores(floor, half_facts, source_turns),
            "single_first_person_regex": scores(regex, half_facts, source_turns),
            "per_rule": {kind: {"candidates": c["candidates"],
                                "precision": round(c["supported"] / c["candidates"], 4)}
                         for kind, c in sorted(per_rule.items(), key=lambda item: -item[1]["candidates"])},
            "missed_facts_by_kind": dict(miss_kinds.most_common()),
            **({"missed_examples": dict(miss_examples)} if examples else {}),
        }
    result["all"] = {
        "conversations": sorted({s["conv"] for s in sessions}),
        "product": scores(every["product"], facts, source_turns),
        "floor_one_candidate_per_turn": scores(every["floor"], facts, source_turns),
        "single_first_person_regex": scores(every["regex"], facts, source_turns),
        "missed_facts_by_kind": dict(every_missed.most_common()),
    }
    result["drained_decision_ops"] = dict(drained_ops)
    return result


def workspace_of(env: common.Env) -> str:
    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.resolution import resolve_workspace

    identity = resolve_workspace(None, Caller(origin=Origin.CLI, cwd=env.workspace), create=True)
    assert identity is not None
    return identity.id


def speed(env: common.Env, sessions: list[dict], count: int) -> dict:
    """Each turn as a live session triggers it: one run, then one drain. Interleaved with each turn, the floor does
    the same durable work bare (an atomic write of the staged file, then one write_bench floor write per candidate:
    the decision row with synchronous=FULL, the file with its fsyncs, the catalog and FTS rows, the index append, the
    event), so both see the same disk at the same moment."""
    import write_bench

    from compozy.config import load_config
    from memory.extractor.drain import drain_inbox
    from memory.extractor.extraction import SessionSource, extract_turns
    from memory.providers import extract_rules

    config = load_config()
    workspace_id = workspace_of(env)
    picked = []
    for session in sessions:
        sid = "speed." + session_id(session)
        picked.extend((sid, turn) for turn in as_turns(session))
        if len(picked) >= count:
            break
    picked = picked[:count]
    floor = write_bench.Floor(env.scratch / "floor", 0, common.Words(7), index_file=False)
    staged_floor = env.scratch / "staged"
    staged_floor.mkdir()
    per_turn: list[float] = []
    cpu_turn: list[float] = []
    every_turn: list[float] = []  # with a drain after every turn too: the figure this bench printed until session 5
    floor_turn: list[float] = []
    rules_only: list[float] = []
    candidates = 0
    for index, (sid, turn) in enumerate(picked):
        began, began_cpu = time.perf_counter(), time.thread_time()
        outcome = extract_turns(source=SessionSource(sid, sid, workspace_id), turns=[turn], context=[],
                                config=config)
        if outcome.staged_file:
            drain_inbox(config)  # extractor_run queues a drain only after a run that staged a file
        per_turn.append(time.perf_counter() - began)
        cpu_turn.append(time.thread_time() - began_cpu)
        began = time.perf_counter()
        if not outcome.staged_file:
            drain_inbox(config)  # the drain the trigger never queues, timed only for the old figure
        every_turn.append(per_turn[-1] + time.perf_counter() - began)
        candidates += outcome.candidate_count
        began = time.perf_counter()
        if outcome.candidate_count:
            common.floor_atomic_write(staged_floor, f"{index}.jsonl", b"x" * 600 * outcome.candidate_count)
            for _ in range(outcome.candidate_count):
                floor.one()
        floor_turn.append(time.perf_counter() - began)
        began = time.perf_counter()
        extract_rules.extract([turn])
        rules_only.append(time.perf_counter() - began)
    floor.close()
    total = sum(per_turn)

    def rate(seconds: list[float]) -> float:
        return round(len(seconds) / sum(seconds), 1) if sum(seconds) else 0.0

    return {
        "turns": len(picked),
        "candidates": candidates,
        "seconds": round(total, 3),
        "turns_per_second": rate(per_turn),
        "per_turn_ms": common.latency_summary(per_turn, counting="turns"),
        "thread_cpu": {"seconds": round(sum(cpu_turn), 3), "turns_per_cpu_second": rate(cpu_turn),
                       "per_turn_ms": common.latency_summary(cpu_turn, counting="turns")},
        "draining_after_every_turn": {"turns_per_second": rate(every_turn),
                                      "per_turn_ms": common.latency_summary(every_turn, counting="turns")},
        "floor_same_durable_work": {"turns_per_second": rate(floor_turn),
                                    "per_turn_ms": common.latency_summary(floor_turn, counting="turns")},
        "product_seconds_over_floor_seconds": round(total / sum(floor_turn), 2) if sum(floor_turn) else None,
        "rules_only": {"turns_per_second": rate(rules_only),
                       "per_turn_ms": common.latency_summary(rules_only, counting="turns")},
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--dev", default="0,1,2", help="conversation numbers of the development half")
    parser.add_argument("--speed-turns", type=int, default=1000)
    parser.add_argument("--examples", action="store_true", help="print a few missed facts of each kind")
    parser.add_argument("--speed-worker", dest="worker", action="store_true", default=None, help=argparse.SUPPRESS)
    # The speed run has its own process and home: it starts from an empty home, not from the quality run's.
    common.main(parser, measure, home="extract", worker=lambda args: common.worker_process(
        "extract-speed", lambda env: speed(env, load(args.data)[0], args.speed_turns)))


def measure(env: common.Env, args: argparse.Namespace) -> dict[str, object]:
    from compozy.config import load_config

    sessions, facts = load(args.data)
    dev = {int(part) for part in args.dev.split(",") if part.strip()}
    provider = load_config().memory.provider.kind
    common.log(f"quality: {len(sessions)} sessions through extract_turns and drain_inbox")
    measured = quality(env, sessions, facts, dev, args.examples)
    common.log(f"speed: {args.speed_turns} turns, one run and one drain each")
    timed = common.run_child([sys.executable, __file__, "--speed-worker", "--data", str(args.data),
                              "--speed-turns", str(args.speed_turns)])
    return {
        "benchmark": "extract_eval",
        "machine": common.machine(),
        "data": str(args.data),
        "provider": provider,
        "quality": measured,
        "speed": timed,
        "targets": TARGETS,
        "targets_met": {
            **{f"{half}_{figure}": measured[half]["product"][figure] >= TARGETS[f"{figure}_min"]
               for half in ("dev", "check", "all") for figure in ("precision", "recall")},
            "turns_per_second": timed["turns_per_second"] >= TARGETS["turns_per_second_min"],
        },
    }


if __name__ == "__main__":
    main()
