"""A real writer process for the crash and concurrency tests (run as a child, never imported by pytest).

It boots like any process that can write (django.setup(), then bootstrap(): migrate and replay), then calls the
service function every surface uses, `memory_write`, in a loop. The last line of stdout is a JSON summary.

Two ways to say what to write:
- generated: `--count N` memories whose name, description and body use only words unique to that memory, so
  the controller's lexical-overlap rule (2+ shared words of 3+ characters) never sees two of them as related;
- explicit: `--spec '[{...WriteInput fields...}, ...]'`.

With `--handshake` the child prints READY after bootstrap and waits for one line on stdin before writing. The
concurrency tests use it to release every writer at the same moment; the crash tests use it to hold a process
that booted *before* another process crashed (like a long-running server).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

WORDS_PER_MEMORY = 8


class Vocabulary:
    """Deterministic 8-letter words. Every word of writer k starts with the k-th letter, so two writers never
    share a word, and a writer never repeats one."""

    def __init__(self, writer_id: int) -> None:
        if not 0 <= writer_id < 26:
            raise SystemExit("--writer-id must be between 0 and 25")
        self._prefix = string.ascii_lowercase[writer_id]
        self._rng = random.Random(f"compozy-crash-writer-{writer_id}")
        self._seen: set[str] = set()

    def word(self) -> str:
        while True:
            word = self._prefix + "".join(self._rng.choice(string.ascii_lowercase) for _ in range(7))
            if word not in self._seen:
                self._seen.add(word)
                return word


def generated_writes(args: argparse.Namespace) -> list[dict[str, Any]]:
    vocabulary = Vocabulary(args.writer_id)
    writes = []
    for _index in range(args.count):
        w = [vocabulary.word() for _ in range(WORDS_PER_MEMORY)]
        # Only unique words and stopwords: nothing two memories could share.
        fields: dict[str, Any] = {
            "type": args.type,
            "scope": args.scope,
            "name": f"{w[0].capitalize()} {w[1].capitalize()}",
            "description": f"The {w[2]} of {w[3]} and {w[4]}",
            "content": f"The {w[5]} is in the {w[6]} with {w[7]}.",
        }
        if args.agent:
            fields["agent_name"] = args.agent
            fields["agent_tier"] = args.agent_tier
        writes.append(fields)
    return writes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True, help="the directory the caller runs in (its cwd)")
    parser.add_argument("--writer-id", type=int, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--type", default="project")
    parser.add_argument("--scope", default="workspace")
    parser.add_argument("--agent", default=None)
    parser.add_argument("--agent-tier", default="workspace")
    parser.add_argument("--spec", default=None, help="a JSON list of WriteInput field dicts")
    parser.add_argument("--handshake", action="store_true")
    args = parser.parse_args()

    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()

    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.memories import WriteInput, memory_write

    writes = json.loads(args.spec) if args.spec else generated_writes(args)
    caller = Caller(origin=Origin.CLI, cwd=Path(args.workspace))

    if args.handshake:
        print("READY", flush=True)
        sys.stdin.readline()

    started = time.monotonic()
    ops: Counter[str] = Counter()
    errors: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    ok = 0
    for index, fields in enumerate(writes):
        try:
            result = memory_write(data=WriteInput.parse(fields), caller=caller)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent, none stops the loop
            errors.append({"index": index, "error": type(exc).__name__, "message": str(exc),
                           "details": getattr(exc, "details", None)})
            continue
        op = result.decision.op
        ops[op] += 1
        if result.applied and op in ("add", "update"):
            ok += 1
        results.append({"op": op, "applied": result.applied, "filename": result.decision.target_filename,
                        "decision": result.decision.id})
    elapsed = time.monotonic() - started
    summary = {"writer": args.writer_id, "ok": ok, "ops": dict(ops), "errors": errors,
               "elapsed_seconds": round(elapsed, 3), "results": results}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
