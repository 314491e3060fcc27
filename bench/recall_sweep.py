"""Variants of the recall pipeline measured side by side on several data sets, each indexed once.

    .venv/bin/python bench/recall_sweep.py --data ../shared/data/recall-dev ../shared/data/recall-dev-facts \\
        --variant base --variant 'context.window=0' --variant 'COVERAGE_BOOST=0'

A variant is `;`-separated settings: `a.b=v` sets the configuration key memory.recall.a.b (through its
COMPOZY_MEMORY__RECALL__A__B variable), `NAME=v` sets the pipeline module's constant NAME. Signals are cleared
before each variant, so every variant sees the same state. Prints one JSON line per variant and set: R@5 overall
and per category, the plain-bm25 floor's R@5 (measured once per set), and p50/p95 ms. A tool for choosing
settings on the dev sets, never a test.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import recall_eval  # noqa: E402


def apply(variant: str) -> dict[str, object]:
    from memory.recall import pipeline

    undo: dict[str, object] = {}
    for setting in filter(None, (part.strip() for part in variant.split(";"))):
        if setting == "base":
            continue
        name, value = setting.split("=", 1)
        if "." in name or name.islower():
            variable = "COMPOZY_MEMORY__RECALL__" + "__".join(part.upper() for part in name.split("."))
            undo[variable] = os.environ.get(variable)
            os.environ[variable] = value
        else:
            undo[name] = getattr(pipeline, name)
            try:
                setattr(pipeline, name, ast.literal_eval(value))
            except (ValueError, SyntaxError):
                setattr(pipeline, name, value)
    return undo


def restore(undo: dict[str, object]) -> None:
    from memory.recall import pipeline

    for name, value in undo.items():
        if name.startswith("COMPOZY_"):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
        else:
            setattr(pipeline, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, nargs="+", required=True)
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args()
    env = common.start("recall-sweep")
    try:
        from django.db import connection

        from memory.domain.text import STOPWORDS, words

        sets = []
        for data in args.data:
            turns, questions = recall_eval.load(data, None)
            indexed = []
            floor = []
            for conv, rows in turns.items():
                caller, by_file, floor_docs = recall_eval.index_conversation(env, f"{data.name}-{conv}", rows)
                indexed.append((caller, by_file, questions[conv]))
                floor.extend(recall_eval.floor_ranks(floor_docs, questions[conv], STOPWORDS, words)[0])
            sets.append((data.name, indexed, recall_eval.metrics(floor)))
        for variant in args.variant or ["base"]:
            undo = apply(variant)
            try:
                for name, indexed, floor in sets:
                    with connection.cursor() as cursor:
                        cursor.execute("DELETE FROM memory_recall_signals")
                    ranks, seconds = [], []
                    for caller, by_file, asked in indexed:
                        for question in asked:
                            rank, spent = recall_eval.ask(caller, by_file, question)
                            ranks.append(rank)
                            seconds.append(spent)
                    figures = recall_eval.metrics(ranks)
                    print(json.dumps({
                        "variant": variant, "data": name,
                        "r5": figures["overall"]["recall@5"],
                        "delta": round(100 * (figures["overall"]["recall@5"] - floor["overall"]["recall@5"]), 1),
                        "by_category": {c: round(100 * (f["recall@5"] - floor[c]["recall@5"]), 1)
                                        for c, f in figures.items() if c != "overall"},
                        "r1": figures["overall"]["recall@1"],
                        "latency_ms": common.latency_summary(seconds),
                    }), flush=True)
            finally:
                restore(undo)
    finally:
        common.finish()


if __name__ == "__main__":
    main()
