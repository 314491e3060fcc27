"""Snapshot assembly at N workspace memories (default 1,000 and 10,000): cold builds and cache hits.

    .venv/bin/python bench/snapshot_bench.py
    .venv/bin/python bench/snapshot_bench.py --sizes 1000 --cold 10 --cached 200
    .venv/bin/python bench/snapshot_bench.py --profile /tmp/snapshot.prof   # cProfile of the cold builds per size

Each size runs in its own worker process, one after the other, with its own fresh COMPOZY_HOME and workspace.

Prefill (not timed): N valid memory files in the workspace root (`<ws>/.compozy/memory/`, prose over a Zipf
vocabulary, provenance spread over the last 60 days), 50 global memories in `$COMPOZY_HOME/memory` (25 user,
25 feedback), and the workspace checkpoint `<ws>/.compozy/memory/project_checkpoint_summary.md` (where the spec
puts it); then one `catalog_reindex`.

Every measured call is `snapshot_assemble(data=SnapshotInput.parse(request), caller=...)`, input parsing included (a
boot request from the CLI origin, no session id):
  cold_no_query     the generation is advanced (`advance_generation()` in a transaction, outside the clock)
                    before each call, so each call builds, stores and memoizes a new snapshot
  cold_with_query   the same, and each call also carries a distinct question, so it runs recall (and records its
                    signals and event) too
  cached_memo       the same request again at the same generation: served from the in-process memo
  cached_db         the same, with `snapshots._memo` cleared before each call (outside the clock): served from
                    the memory_snapshots row, which is what a fresh process sees
  cached_memo_with_query   the memo hit for a request that carries a question (informational)

Checks: the cached bytes equal the cold bytes (sha256), cold builds at different generations of unchanged memory
are identical, a bare generation advance rebuilds (same bytes), and a real write (`memory_write`) produces a new
text at a new generation.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_CACHED_P50_MS = 1.0
GLOBAL_MEMORIES = 50


def main() -> None:
    parser = common.size_runner_parser(__doc__, sizes="1000,10000", seed=20240605,
                                       profile="cProfile the cold builds of each size into PATH.<N>")
    parser.add_argument("--cold", type=int, default=30, help="timed cold assemblies per case")
    parser.add_argument("--cached", type=int, default=1000, help="timed cache hits per case")
    common.main(parser, coordinate, worker=lambda args: common.worker_process(
        f"snapshot-{args.worker}", lambda env: worker(env, args.worker, args.seed, args.cold, args.cached,
                                                      args.profile)))


def coordinate(_env: None, args: argparse.Namespace) -> dict[str, object]:
    sizes = sorted(common.parse_sizes(args.sizes))
    results = common.run_size_workers(__file__, sizes, ["--seed", str(args.seed), "--cold", str(args.cold),
                                                        "--cached", str(args.cached)], args.profile)
    return {
        "benchmark": "snapshot",
        "machine": common.machine(),
        "profiled": bool(args.profile),
        "sizes": results,
        "summary": {
            str(size): {
                **common.p50_p95(block, {name: name for name in ("cold_no_query", "cold_with_query", "cached_memo",
                                                                 "cached_db")}),
                "all_checks_passed": block["all_checks_passed"],
            }
            for size, block in ((size, results[str(size)]) for size in sizes)
        },
        "targets": {
            "cached_ms_max": TARGET_CACHED_P50_MS,
            "cached_memo_under_1ms_p50_every_size": all(
                results[str(s)]["cached_memo"]["p50_ms"] < TARGET_CACHED_P50_MS for s in sizes),
            "cached_memo_under_1ms_p95_every_size": all(
                results[str(s)]["cached_memo"]["p95_ms"] < TARGET_CACHED_P50_MS for s in sizes),
            "cached_db_under_1ms_p50_every_size": all(
                results[str(s)]["cached_db"]["p50_ms"] < TARGET_CACHED_P50_MS for s in sizes),
            "cached_db_under_1ms_p95_every_size": all(
                results[str(s)]["cached_db"]["p95_ms"] < TARGET_CACHED_P50_MS for s in sizes),
        },
    }


def worker(env: common.Env, size: int, seed: int, cold: int, cached: int, profile: str | None) -> dict[str, object]:
    from django.db import transaction

    from memory.catalog.indexer import advance_generation, current_generation
    from memory.domain.document import render_document
    from memory.domain.enums import MemoryType, Scope
    from memory.domain.models import Frontmatter, Provenance, ScopeRef
    from memory.models import Snapshot
    from memory.services import snapshots
    from memory.services.memories import WriteInput, memory_write
    from memory.services.snapshots import SnapshotInput, snapshot_assemble
    from memory.sessions.snapshot import CHECKPOINT_FILENAME

    def write(home: common.Prefill) -> list[Path]:
        """N workspace memories, GLOBAL_MEMORIES global ones (half user, half feedback), the checkpoint."""
        global_root = home.resolved.root(ScopeRef(scope=Scope.GLOBAL))
        paths = common.write_prose_memories(home.root, size, home.words, home.rng)
        paths += common.write_prose_memories(global_root, GLOBAL_MEMORIES // 2, home.words, home.rng,
                                             memory_type="user", scope="global")
        paths += common.write_prose_memories(global_root, GLOBAL_MEMORIES - GLOBAL_MEMORIES // 2, home.words,
                                             home.rng, memory_type="feedback", scope="global")
        checkpoint_body = "\n".join(" ".join(home.words.words(12)).capitalize() + "." for _ in range(20))
        checkpoint = Frontmatter(name="checkpoint summary", description="Machine-maintained continuity context.",
                                 type=MemoryType.PROJECT, scope=Scope.WORKSPACE,
                                 provenance=Provenance(created_at="2024-01-01T00:00:00Z",
                                                       updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        (home.root / CHECKPOINT_FILENAME).write_text(render_document(checkpoint, checkpoint_body), "utf-8")
        return [*paths, home.root / CHECKPOINT_FILENAME]

    home = common.prefill(env, size, seed, write)
    caller, words = home.caller, home.words

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()

    def assemble(request: dict[str, object], *, profiled: bool = False) -> tuple[float, object]:
        if profiled:
            profiler.enable()
        started = time.perf_counter()
        result = snapshot_assemble(data=SnapshotInput.parse(request), caller=caller)
        elapsed = time.perf_counter() - started
        if profiled:
            profiler.disable()
        return elapsed, result

    def advance() -> None:
        with transaction.atomic():
            advance_generation()

    questions = [query.text for query in common.prose_queries(words, cold + 3, seed + 1)]

    # Cold builds. Three untimed builds first (one of each kind) warm the caches of SQLite and the OS.
    assemble({})
    advance()
    assemble({"query": questions[-1]})
    common.log(f"N={size}: {cold} cold builds without a query, {cold} with one")
    cold_plain: list[float] = []
    cold_query: list[float] = []
    plain_digests: set[str] = set()
    cold_flags: list[bool] = []
    generations: set[int] = set()
    for index in range(cold):
        # Interleaved, so both kinds see the same background load.
        advance()
        elapsed, result = assemble({}, profiled=profiler is not None)
        cold_plain.append(elapsed)
        plain_digests.add(result.sha256)
        cold_flags.append(result.cached)
        generations.add(result.generation)
        advance()
        elapsed, result = assemble({"query": questions[index]}, profiled=profiler is not None)
        cold_query.append(elapsed)
        cold_flags.append(result.cached)
        generations.add(result.generation)
    if profiler is not None:
        common.dump_profile(profiler, profile, f"the cold builds at N={size}")

    # Cache hits at one generation: the cold text of this generation first, then the same request again.
    advance()
    _elapsed, cold_result = assemble({})
    cold_text, cold_digest, generation = cold_result.text, cold_result.sha256, cold_result.generation
    common.log(f"N={size}: {cached} memo hits, {cached} database hits")
    memo_s: list[float] = []
    db_s: list[float] = []
    memo_ok = db_ok = True
    for _ in range(cached):
        elapsed, result = assemble({})
        memo_s.append(elapsed)
        memo_ok &= (result.cached and result.sha256 == cold_digest and result.text == cold_text
                    and result.generation == generation)
    for _ in range(cached):
        snapshots._memo.clear()
        elapsed, result = assemble({})
        db_s.append(elapsed)
        db_ok &= (result.cached and result.sha256 == cold_digest and result.text == cold_text
                  and result.generation == generation)
    query_text = questions[0]
    assemble({"query": query_text})  # cold (or DB) for this generation, then memo hits
    query_memo_s = [assemble({"query": query_text})[0] for _ in range(cached)]

    # A bare generation advance rebuilds (nothing changed, so the same bytes); a real write gives a new text.
    advance()
    _elapsed, rebuilt = assemble({})
    item = common.prose_content(words)
    written = memory_write(data=WriteInput.parse({"type": "project", "name": item.name,
                                                  "description": item.description, "content": item.body}),
                           caller=caller)
    _elapsed, after_write = assemble({})
    text = cold_text
    checks = {
        "cold_builds_all_uncached": not any(cold_flags),
        "cold_builds_distinct_generations": len(generations) == 2 * cold,
        "cold_texts_without_query_identical_across_generations": len(plain_digests) == 1,
        "memo_hits_byte_identical_to_cold": memo_ok,
        "db_hits_byte_identical_to_cold": db_ok,
        "cached_sha256_equals_cold_sha256": memo_ok and db_ok,
        "generation_advance_rebuilds": not rebuilt.cached and rebuilt.generation > generation,
        "generation_advance_alone_same_bytes": rebuilt.sha256 == cold_digest,
        "write_op": str(written.decision.op),
        "write_gives_new_generation": after_write.generation > rebuilt.generation,
        "write_gives_new_text": not after_write.cached and after_write.sha256 != cold_digest,
        "global_index_present": '<compozy_memory_index scope="global">' in text,
        "workspace_index_present": '<compozy_memory_index scope="workspace">' in text,
        "index_truncated_marker_present": "[index truncated:" in text,
        "checkpoint_section_present": "<compozy_checkpoint_summary>" in text,
    }
    expected_true = [key for key, value in checks.items() if isinstance(value, bool)]
    return {
        "memories": {"workspace": size, "global": GLOBAL_MEMORIES, "checkpoint_file": str(CHECKPOINT_FILENAME)},
        "prefill": {"write_files_s": round(home.write_s, 2), "reindex_s": round(home.reindex_s, 2),
                    "files": home.files, "catalog_rows": home.catalog_rows},
        "snapshot": {"bytes": len(text.encode()), "entries": len(cold_result.entries),
                     "lines": text.count("\n"), "stored_snapshots": Snapshot.objects.count(),
                     "generation_at_end": current_generation()},
        "cold_no_query": common.timing_summary(cold_plain),
        "cold_with_query": common.timing_summary(cold_query),
        "cached_memo": common.timing_summary(memo_s),
        "cached_db": common.timing_summary(db_s),
        "cached_memo_with_query": common.timing_summary(query_memo_s),
        "cached_memo_under_1ms": {"p50": common.timing_summary(memo_s)["p50_ms"] < TARGET_CACHED_P50_MS,
                                  "p95": common.timing_summary(memo_s)["p95_ms"] < TARGET_CACHED_P50_MS},
        "cached_db_under_1ms": {"p50": common.timing_summary(db_s)["p50_ms"] < TARGET_CACHED_P50_MS,
                                "p95": common.timing_summary(db_s)["p95_ms"] < TARGET_CACHED_P50_MS},
        "checks": checks,
        "all_checks_passed": all(checks[key] for key in expected_true),
        "failed_checks": [key for key in expected_true if not checks[key]],
    }


if __name__ == "__main__":
    main()
