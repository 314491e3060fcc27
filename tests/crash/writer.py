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

A third way, for `bench/crash_loop.py` and `bench/soak.py`: `--op write|edit|delete|revert|propose|reindex|check`
does one random operation of that kind (targets picked from the catalog, words from `--seed`). Before it, the
process prints one JSON line `{"violations": [...]}`: the invariants (tests/crash/invariants.py) checked right
after its bootstrap replayed what an earlier, killed process left.
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

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run as a script: `tests.crash.invariants` must import

WORDS_PER_MEMORY = 8


class Vocabulary:
    """Deterministic 8-letter words. Every word of writer k starts with the k-th letter, so two writers never
    share a word, and a writer never repeats one."""

    def __init__(self, writer_id: int, seed: str = "") -> None:
        if not 0 <= writer_id < 26:
            raise SystemExit("--writer-id must be between 0 and 25")
        self._prefix = string.ascii_lowercase[writer_id]
        self._rng = random.Random(f"compozy-crash-writer-{writer_id}{seed}")
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


OPS = ("write", "edit", "delete", "revert", "propose", "reindex")


def random_op(op: str, rng: random.Random, vocabulary: Vocabulary, caller: Any) -> dict[str, Any]:
    """One operation of kind `op` through the service every surface calls; returns a small summary."""
    from memory.models import CatalogEntry, Decision
    from memory.services import catalog, decisions, memories, propose

    def words(count: int) -> list[str]:
        return [vocabulary.word() for _ in range(count)]

    def existing() -> CatalogEntry | None:
        rows = list(CatalogEntry.objects.filter(is_system=False, root_key__in=roots()).order_by("id")[:200])
        return rng.choice(rows) if rows else None

    def roots() -> list[str]:
        return list(CatalogEntry.objects.values_list("root_key", flat=True).distinct()) or ["global"]

    def selector(entry: CatalogEntry) -> dict[str, Any]:
        return {"scope": entry.scope}

    target = existing()
    if op in ("edit", "delete", "propose") and target is None:
        op = "write"
    if op == "write":
        w = words(6)
        memory_type, scope = rng.choice([("project", "workspace"), ("user", "global"), ("reference", "workspace")])
        result = memories.memory_write(data=memories.WriteInput.parse({
            "type": memory_type, "scope": scope, "name": f"{w[0].capitalize()} {w[1].capitalize()}",
            "description": f"The {w[2]} of {w[3]}", "content": f"The {w[4]} is near the {w[5]}."}), caller=caller)
    elif op == "edit":
        w = words(3)
        result = memories.memory_edit(data=memories.EditInput.parse({
            "filename": target.filename, **selector(target), "content": f"Now the {w[0]} holds {w[1]} and {w[2]}."}),
            caller=caller)
    elif op == "delete":
        result = memories.memory_delete(data=memories.DeleteInput.parse({"filename": target.filename,
                                                                          **selector(target)}), caller=caller)
    elif op == "propose":
        w = words(4)
        result = propose.memory_propose(data=propose.ProposeInput.parse({
            "filename": target.filename, **selector(target),
            "operations": [{"action": "add", "content": f"Also the {w[0]} of {w[1]}."},
                           {"action": "add", "content": f"And the {w[2]} with {w[3]}."}]}), caller=caller)
        decision = result.decision
        return {"op": op, "decision": decision.id if decision else None, "decided": decision.op if decision else None,
                "applied": result.applied}
    elif op == "revert":
        recent = list(Decision.objects.filter(op__in=["add", "update", "delete"], applied_at__isnull=False)
                      .order_by("-decided_at", "-id").values_list("id", flat=True)[:8])
        if not recent:
            return {"op": op, "skipped": "nothing to revert"}
        result = decisions.decision_revert(data=decisions.RevertInput.parse({"decision_id": rng.choice(recent)}),
                                           caller=caller)
        return {"op": op, "decision": result.decision.id, "reverted": result.reverted}
    elif op == "reindex":
        result = catalog.catalog_reindex(data=catalog.ReindexInput.parse({}), caller=caller)
        return {"op": op, "external_decisions": result.external_decisions}
    else:
        raise SystemExit(f"unknown op {op}")
    return {"op": op, "decision": result.decision.id, "decided": result.decision.op, "applied": result.applied}


def hand_edit(workspace: Path, rng: random.Random, serial: int) -> str:
    """What a person does between two reindexes: a new file, a changed body, or a removed file."""
    root = workspace / ".compozy" / "memory"
    documents = sorted(p for p in root.glob("*.md") if p.name != "MEMORY.md") if root.is_dir() else []
    kind = rng.choice(["new", "change", "remove"]) if documents else "new"
    if kind == "new":
        root.mkdir(parents=True, exist_ok=True)
        word = f"handword{serial:05d}"
        (root / f"project_hand_{serial:05d}.md").write_text(
            f"---\nname: Hand {serial}\ndescription: Written by hand {word}\ntype: project\nscope: workspace\n---\n\n"
            f"The {word} note was written without the controller.\n", "utf-8")
    elif kind == "change":
        path = rng.choice(documents)
        path.write_text(path.read_text("utf-8") + f"\nChanged by hand {serial}.\n", "utf-8")
    else:
        rng.choice(documents).unlink()
    return kind


def run_op(args: argparse.Namespace) -> None:
    """`--op`: replay (bootstrap, done), finish a killed reindex if asked, check, then one operation."""
    from django.db import OperationalError

    from memory.domain.enums import Origin
    from memory.domain.errors import CompozyError, environment_error
    from memory.services import catalog
    from memory.services.inputs import Caller
    from tests.crash.invariants import violations

    caller = Caller(origin=Origin.TOOL if args.op == "propose" else Origin.CLI, cwd=Path(args.workspace))
    if args.finish_reindex:
        # A killed reindex leaves hand edits unrecorded; the operator simply runs it again (without the fault).
        fault = os.environ.pop("COMPOZY_FAULT", None)
        catalog.catalog_reindex(data=catalog.ReindexInput.parse({}), caller=caller)
        if fault is not None:
            os.environ["COMPOZY_FAULT"] = fault
    from compozy.config import compozy_home

    print(json.dumps({"violations": violations(compozy_home())}), flush=True)
    if args.op == "check":
        return
    if args.handshake:
        print("READY", flush=True)
        sys.stdin.readline()
    rng = random.Random(args.seed)
    vocabulary = Vocabulary(args.writer_id, seed=str(args.seed))
    if args.op == "reindex":
        # After the check: a hand edit is drift by design until a reindex records it.
        hand_edit(Path(args.workspace), rng, int(str(args.seed)[-5:]))
    try:
        try:
            summary = random_op(args.op, rng, vocabulary, caller)
        except (OperationalError, OSError) as exc:
            # What every surface does (Verb.run): a locked database or a full disk is a stable refusal.
            translated = environment_error(exc)
            if translated is None:
                raise
            raise translated from exc
    except CompozyError as error:  # a refusal (a conflict, say) is an answer, not a failure of the process
        summary = {"op": args.op, "error": error.code, "reason": error.details.get("reason")}
    print(json.dumps(summary), flush=True)


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
    parser.add_argument("--op", choices=(*OPS, "check"), help="one random operation (crash loop, soak)")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--finish-reindex", action="store_true", help="rerun a reindex a killed process left")
    args = parser.parse_args()

    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()
    if args.op:
        run_op(args)
        return

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
