"""Search latency at N memories (default 1,000, 10,000 and 100,000), beside a bare FTS5 floor.

    .venv/bin/python bench/search_bench.py                          # the 100,000 prefill takes several minutes
    .venv/bin/python bench/search_bench.py --sizes 1000,10000
    .venv/bin/python bench/search_bench.py --sizes 10000 --profile /tmp/search.prof   # cProfile of the product calls

Each size runs in its own worker process, one after the other, with its own fresh COMPOZY_HOME and workspace.

Long memories: `--long-sizes` (default 5,000) runs each of its sizes again with bodies of 2-5 KB (`LONG_BODY_BYTES`,
about 25-60 lines of twelve words, several passages each: what coding agents write most), reported as `<N>_long`.

Prefill (not timed): N valid memory files written straight into the workspace root (`<ws>/.compozy/memory/
project_<unique>.md`, rendered by `render_document` with provenance created_at/updated_at spread over the last 60
days) in prose over a Zipf vocabulary (`common.ProseWords`), so memories share common words; then one
`catalog_reindex`.

Queries: 200 deterministic questions per size (plus 20 distinct warm-up questions), each 4-8 words of the same
vocabulary (half at their natural frequency, half uniform, so mostly rare) framed by "what"/"where"/"how"; 10% carry
a one-letter typo in a word of 5+ letters, which recall sends down its trigram 4-gram path.

Three variants run interleaved query by query, the order rotating each round so each goes first a third of the time:
  product        `memory.services.recall.memory_search` (the CLI's call): resolve, parse, the two FTS5 lists, the
                 signal lookup, scoring and shadowing, the answer, then the signal update and the event
  no_signals     the same call with `memory.services.recall._update_signals` patched to a no-op (the event is
                 still written): the difference is what the signal update costs
  floor          the FTS5 statements the pipeline issues, run bare on the same database through a plain read-only
                 sqlite3 connection: the probes of a question whose terms the pipeline has not counted yet (one
                 statement of term counts and whole-word probes, one of its unfound terms' 4-gram counts; the
                 product keeps both per memory generation, so a repeated term costs it nothing), then the
                 word-index ranking (the statements of its tiers when the question holds frequent terms,
                 `memory.catalog.fts.RankSplit`) and the trigram ranking. Their SQL text and parameters are
                 produced by `memory.catalog.fts` itself (captured from a recording cursor that also runs them,
                 since a split ranking's later statements depend on what the first return; Django's %s
                 placeholders turned into ?). Statements are prepared before the clock starts; the floor times
                 execute + fetch only.
Each is timed in wall time (`product`, `floor`) and in the searching thread's CPU time (`product_cpu`,
`floor_cpu`), which on a shared machine leaves out the waits for a core. The product runs part of each question
in a second thread (`memory.recall.side_thread`: the trigram ranking and the semantic similarities, beside the
word-index ranking), which the searching thread's CPU time does not count: `product_process_cpu` is the CPU time
of the whole process over the same call (the floor is one thread, so its two are the same).

After the worker's timed rounds, the coordinator starts a child (`--search-only`) that opens the finished home the
way a CLI process does and runs only the warm-up and the 200 product searches, and reports its own peak RSS
(ru_maxrss; the coordinator never imports Django, so the value Linux carries over from the parent is small). Then
the coordinator removes the home.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_FLOOR_RATIO = 3.0
TARGET_P95_MS_AT_10000 = 20.0
LONG_BODY_BYTES = common.LONG_BODY_BYTES
WARMUP_SEED_OFFSET = 1_000_003


def main() -> None:
    parser = common.size_runner_parser(__doc__, sizes="1000,10000,100000", seed=20240604,
                                       profile="cProfile the product calls of each size into PATH.<N>")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--warmup", type=int, default=20, help="untimed warm-up queries per size")
    parser.add_argument("--long-sizes", default="5000",
                        help="comma-separated N run again with 2-5 KB bodies ('' for none)")
    parser.add_argument("--body-bytes", help=argparse.SUPPRESS)
    parser.add_argument("--search-only", nargs=2, metavar=("HOME", "WORKSPACE"), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    common.main(parser, lambda _env, args: coordinate(sorted(common.parse_sizes(args.sizes)), args), worker=child,
                is_worker=lambda args: args.worker is not None or bool(args.search_only))


def child(args: argparse.Namespace) -> None:
    if args.search_only:
        common.emit(search_only(Path(args.search_only[0]), Path(args.search_only[1]), args.size, args.seed,
                                args.queries, args.warmup))
        return
    # The home stays for the coordinator's search-only child; the coordinator removes it afterwards.
    body_bytes = tuple(int(part) for part in args.body_bytes.split("-")) if args.body_bytes else None
    common.worker_process(f"search-{args.worker}", lambda env: worker(env, args.worker, args.seed, args.queries,
                                                                      args.warmup, args.profile, body_bytes),
                          keep_home=True)


# ---------------------------------------------------------------------------------------------------------------
# The coordinator: one worker per size, one after the other (never two sizes on the 2 cores at once).


def coordinate(sizes: list[int], args: argparse.Namespace) -> dict[str, object]:
    def search_only_child(size: int, block: dict[str, object]) -> None:
        run = block.pop("_run")
        try:
            # Started from this process, which never imports Django, so the child's ru_maxrss (inherited across
            # fork on Linux) is its own: the search's, not the prefill's.
            common.log(f"N={size}: search-only child process")
            block["search_process"] = common.run_child([
                sys.executable, __file__, "--search-only", run["home"], run["workspace"], "--size", str(size),
                "--seed", str(args.seed), "--queries", str(args.queries), "--warmup", str(args.warmup)])
        finally:
            shutil.rmtree(run["base"], ignore_errors=True)

    worker_args = ["--seed", str(args.seed), "--queries", str(args.queries), "--warmup", str(args.warmup)]
    results = common.run_size_workers(__file__, sizes, worker_args, args.profile, after=search_only_child)
    long_sizes = sorted(common.parse_sizes(args.long_sizes))
    long_args = [*worker_args, "--body-bytes", "-".join(map(str, LONG_BODY_BYTES))]
    for size, block in common.run_size_workers(__file__, long_sizes, long_args, args.profile,
                                               after=search_only_child).items():
        results[f"{size}_long"] = block
    largest = max(sizes) if sizes else None
    document: dict[str, object] = {
        "benchmark": "search",
        "machine": common.machine(),
        "queries_per_size": args.queries,
        "warmup_per_size": args.warmup,
        "profiled": bool(args.profile),
        "sizes": results,
        "summary": {
            str(size): {
                **common.p50_p95(block, {"product": "product", "product_without_signal_updates": "no_signals",
                                         "floor": "floor", "product_cpu": "product_cpu",
                                         "product_process_cpu": "product_process_cpu",
                                         "floor_cpu": "floor_cpu"}),
                "product_p50_over_floor_p50": block["ratios"]["product_p50_over_floor_p50"],
                "product_p95_over_floor_p95": block["ratios"]["product_p95_over_floor_p95"],
                "within_3x_of_floor": block["ratios"]["within_3x_of_floor"],
                "signal_update_cost_p50_ms": block["signal_update_cost"]["p50_ms"],
            }
            for size, block in results.items()
        },
        **({f"peak_rss_mb_search_process_at_{largest}": results[str(largest)]["search_process"]["peak_rss_mb"]}
           if largest else {}),
        "targets": {
            "floor_ratio_max": TARGET_FLOOR_RATIO,
            "within_3x_of_floor_at_every_size": all(block["ratios"]["within_3x_of_floor"]
                                                    for block in results.values()),
            "p95_ms_max_at_10000": TARGET_P95_MS_AT_10000,
            "p95_under_20ms_at_10000": (results["10000"]["product"]["p95_ms"] < TARGET_P95_MS_AT_10000
                                        if "10000" in results else None),
            "p95_ms_max_with_long_memories": TARGET_P95_MS_AT_10000,
            "p95_under_20ms_with_long_memories": {key: block["product"]["p95_ms"] < TARGET_P95_MS_AT_10000
                                                  for key, block in results.items() if key.endswith("_long")},
        },
    }
    return document


# ---------------------------------------------------------------------------------------------------------------
# The worker: prefill one size, run the interleaved rounds, then the search-only child.


def queries_for(size: int, seed: int, count: int, warmup: int) -> tuple[list[common.Query], list[common.Query]]:
    # The vocabulary is the prefill's (same seed); the questions are the same at every size and in the child.
    words = common.ProseWords(seed)
    return (common.prose_queries(words, count, seed + 1),
            common.prose_queries(words, warmup, seed + WARMUP_SEED_OFFSET))


_QMARK = re.compile(r"(?<!%)%s")  # what Django's SQLite backend does to a query before sqlite3 sees it


class _Recorder:
    """A cursor that records what `memory.catalog.fts` would execute, so the floor runs the module's own SQL."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, list[object]]] = []

    def execute(self, sql: str, params: list[object] = ()) -> None:  # type: ignore[assignment]
        self.statements.append((_QMARK.sub("?", sql).replace("%%", "%"), list(params)))

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[tuple]:
        return []


class _LiveRecorder(_Recorder):
    """Records the statements and also runs them on the floor's connection, for the probes whose answers decide
    what the pipeline issues next."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        super().__init__()
        self.connection = connection
        self._rows: list[tuple] = []

    def execute(self, sql: str, params: list[object] = ()) -> None:  # type: ignore[assignment]
        super().execute(sql, params)
        self._rows = self.connection.execute(*self.statements[-1]).fetchall()

    def fetchone(self) -> tuple | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple]:
        return self._rows


class Floor:
    """The pipeline's FTS5 statements, bare, on a plain read-only sqlite3 connection to the product's database."""

    def __init__(self, db_path: Path, root_keys: list[str], pool: int) -> None:
        self.connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, isolation_level=None,
                                          check_same_thread=False)
        # The product's connection settings (page cache, memory-mapped reads), so the floor differs only in what
        # runs around the statements.
        from django.conf import settings

        for pragma in settings.DATABASES["default"]["OPTIONS"]["init_command"].split(";"):
            if pragma.strip().upper().startswith(("PRAGMA MMAP_SIZE", "PRAGMA CACHE_SIZE")):
                self.connection.execute(pragma)
        self.root_keys = root_keys
        self.pool = pool

    def plan(self, text: str) -> dict[str, object]:
        """The statements for one query, in the pipeline's order: probes, word index, trigram index. The probes
        are run here once to learn which terms are unknown (the database does not change between runs)."""
        from memory.catalog import fts
        from memory.recall.query import parse_query

        query = parse_query(text)
        if query.trivial:
            return {"probes": [], "lists": [], "unknown": [], "terms": len(query.terms), "trivial": True}
        from memory.catalog.indexer import current_generation
        from memory.recall.pipeline import classify_terms, common_grams, forget_statistics, word_ranking

        probes = _LiveRecorder(self.connection)
        # The probes of a question none of whose terms the pipeline has counted yet (it keeps the counts per memory
        # generation): the term statistics, then the counts of its unfound terms' 4-grams.
        forget_statistics()
        generation = current_generation()
        common, rare, unfound = classify_terms(probes, query, generation)
        grams = common_grams(probes, query, unfound, generation)
        unicode_expression, split = word_ranking(probes, query, common, generation, self.pool)
        forget_statistics()  # the product starts from what it counts itself, not from the floor's planning
        # The document count is cached by the pipeline per memory generation, not issued per query.
        probes.statements = [(sql, params) for sql, params in probes.statements if "FROM memory_chunks" not in sql]
        unknown = unfound
        # Run live: which ranked statements a split ranking issues depends on what the first ones return. Only the
        # ranked FTS5 statements are kept (reading the rows of the hits is the product's, not the floor's).
        lists = _LiveRecorder(self.connection)
        fts.recall_unicode(lists, expression=unicode_expression, root_keys=self.root_keys, include_system=False,
                           limit=self.pool, split=split)
        unicode_statements = len([sql for sql, _params in lists.statements if "MATCH" in sql])
        trigram_expression = query.trigram_expression(rare, unfound, grams)
        if trigram_expression:
            fts.recall_trigram(lists, expression=trigram_expression, root_keys=self.root_keys,
                               include_system=False, limit=self.pool)
        return {"probes": probes.statements, "lists": [(sql, params) for sql, params in lists.statements
                                                       if "MATCH" in sql],
                "unicode_statements": unicode_statements, "unknown": sorted(unknown), "terms": len(query.terms),
                "trivial": False, "unicode_expression": unicode_expression, "split": split}

    def run(self, plan: dict[str, object]) -> tuple[float, float]:
        """(wall seconds, this thread's CPU seconds)."""
        execute = self.connection.execute
        started, cpu_started = time.perf_counter(), time.thread_time()
        for sql, params in plan["probes"]:
            execute(sql, params).fetchone()
        for sql, params in plan["lists"]:
            execute(sql, params).fetchall()
        return time.perf_counter() - started, time.thread_time() - cpu_started

    def unicode_hits(self, plan: dict[str, object]) -> list[tuple]:
        """The word-index hits of the plan's ranked statements, merged in ranked order (one statement, or the
        parts of a split ranking, which score disjoint passages)."""
        hits = [row for sql, params in plan["lists"][: plan["unicode_statements"]]
                for row in self.connection.execute(sql, params).fetchall()]
        return sorted(hits, key=lambda hit: (hit[1], hit[0]))

    def close(self) -> None:
        self.connection.close()


def floor_ranks_alike(product_rows: list[tuple], floor_hits: list[tuple], owner: dict[int, int]) -> bool:
    """Whether the word index's memories (RECALL_COLUMNS rows: the score second, the chunk id second to last) are
    the floor's hits (chunk id, score; best first) taken by the best passage of each memory (`owner`: chunk id ->
    entry id), in the same order with the same scores."""
    first_passages: dict[int, tuple] = {}
    for hit in floor_hits:
        first_passages.setdefault(owner[hit[0]], hit)
    floor_rows = list(first_passages.values())[: len(product_rows)]
    return ([(row[-2], round(row[1], 9)) for row in product_rows]
            == [(hit[0], round(hit[1], 9)) for hit in floor_rows])


def worker(env: common.Env, size: int, seed: int, count: int, warmup: int, profile: str | None,
           body_bytes: tuple[int, int] | None = None) -> dict[str, object]:
    from django.db import connection

    from memory.catalog import fts
    from memory.domain.enums import EventOp
    from memory.models import Event
    from memory.services import recall as recall_service
    from memory.services.recall import SearchInput, memory_search
    from memory.services.scopes import visible_refs

    write = (lambda p: common.write_prose_memories(p.root, size, p.words, p.rng, body_bytes=body_bytes)) \
        if body_bytes else None
    home = common.prefill(env, size, seed, write)  # not timed: the files, then one reindex
    caller, resolved = home.caller, home.resolved

    timed, warm = queries_for(size, seed, count, warmup)
    root_keys = [r.root_key for r in visible_refs(SearchInput.parse({"query": "x"}), resolved)]
    pool = resolved.config.memory.recall.raw_candidates
    floor = Floor(Path(connection.settings_dict["NAME"]), root_keys, pool)
    plans = [floor.plan(query.text) for query in timed]
    warm_plans = [floor.plan(query.text) for query in warm]

    # The floor must run exactly what the product runs: compare its rows with the module's own call through
    # Django's connection, for a few queries.
    # The floor's first statements are the ranked word-index query (over-fetched; in parts when split); the product
    # keeps the best visible passage of each of the first `pool` memories among its hits (all are visible in this
    # one-root database; a long memory's other passages are hits too, so the floor's are taken per memory alike).
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, entry_id FROM memory_chunks")
        owner = dict(cursor.fetchall())
    same_rows = True
    for plan in [plan for plan in plans if not plan["trivial"]][:10]:
        with connection.cursor() as cursor:
            product_rows = fts.recall_unicode(cursor, expression=plan["unicode_expression"], root_keys=root_keys,
                                              include_system=False, limit=pool, split=plan["split"])
        same_rows &= floor_ranks_alike(product_rows, floor.unicode_hits(plan), owner)

    def noop(*_args: object) -> None:
        return None

    real_update = recall_service._update_signals
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    result_counts: list[int] = []

    def product(text: str, *, signals: bool, profiled: bool = False) -> tuple[float, float, float]:
        recall_service._update_signals = real_update if signals else noop
        try:
            if profiled:
                profiler.enable()
            started, cpu_started, process_started = time.perf_counter(), time.thread_time(), time.process_time()
            result = memory_search(data=SearchInput.parse({"query": text}), caller=caller)
            elapsed = (time.perf_counter() - started, time.thread_time() - cpu_started,
                       time.process_time() - process_started)
            if profiled:
                profiler.disable()
        finally:
            recall_service._update_signals = real_update
        if signals:
            result_counts.append(len(result.results))
        return elapsed

    common.log(f"N={size}: {len(warm)} warm-up rounds")
    for query, plan in zip(warm, warm_plans, strict=True):
        product(query.text, signals=True)
        product(query.text, signals=False)
        floor.run(plan)
    result_counts.clear()
    events_before = Event.objects.filter(op=EventOp.RECALL_EXECUTED.value).count()

    common.log(f"N={size}: {len(timed)} timed rounds (product, no_signals, floor; rotating order)")
    variants = ["product", "no_signals", "floor"]
    times: dict[str, list[float]] = {variant: [] for variant in variants}
    # The searching thread's CPU time beside the wall time: on a shared machine wall time also counts the waits
    # for a core, this does not (it still counts SQLite's work, done in this thread).
    cpu_times: dict[str, list[float]] = {variant: [] for variant in variants}
    # The whole process's CPU time: the side thread's share of a question too (the floor's equals its thread's).
    process_times: dict[str, list[float]] = {variant: [] for variant in variants}
    for index, (query, plan) in enumerate(zip(timed, plans, strict=True)):
        shift = index % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            if variant == "product":
                wall, cpu, process = product(query.text, signals=True, profiled=profiler is not None)
            elif variant == "no_signals":
                wall, cpu, process = product(query.text, signals=False)
            else:
                wall, cpu = floor.run(plan)
                process = cpu
            times[variant].append(wall)
            cpu_times[variant].append(cpu)
            process_times[variant].append(process)
        if (index + 1) % 50 == 0:
            common.log(f"N={size}: round {index + 1}/{len(timed)}")
    floor.close()
    events = Event.objects.filter(op=EventOp.RECALL_EXECUTED.value).count() - events_before
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(recall_count), 0) FROM memory_recall_signals")
        signal_rows, signal_recalls = cursor.fetchone()
    if profiler is not None:
        common.dump_profile(profiler, profile, f"the timed product calls at N={size}")

    product_s, bare_s, floor_s = times["product"], times["no_signals"], times["floor"]
    product_sum, bare_sum, floor_sum = (common.timing_summary(product_s), common.timing_summary(bare_s),
                                        common.timing_summary(floor_s))
    differences = [a - b for a, b in zip(product_s, bare_s, strict=True)]
    worker_rss = common.peak_rss_mb()

    p50_ratio = product_sum["p50_ms"] / floor_sum["p50_ms"]
    p95_ratio = product_sum["p95_ms"] / floor_sum["p95_ms"]
    return {
        "memories": size,
        "body_bytes": list(body_bytes) if body_bytes else None,
        "prefill": {"write_files_s": round(home.write_s, 2), "reindex_s": round(home.reindex_s, 2),
                    "seconds": round(home.write_s + home.reindex_s, 2), "catalog_rows": home.catalog_rows,
                    "files": home.files, "total_bytes": home.total_bytes},
        "queries": {
            "timed": len(timed),
            "warmup": len(warm),
            "with_typo": sum(query.typo for query in timed),
            "with_unknown_terms_trigram_4grams": sum(bool(plan["unknown"]) for plan in plans),
            "typo_queries_with_unknown_terms": sum(bool(plan["unknown"])
                                                   for query, plan in zip(timed, plans, strict=True) if query.typo),
            "trivial": sum(bool(plan["trivial"]) for plan in plans),
            "mean_terms": round(sum(plan["terms"] for plan in plans) / len(plans), 2),
            "mean_results_returned": round(sum(result_counts) / max(1, len(result_counts)), 2),
            "examples": ([query.text for query in timed if not query.typo][:3]
                         + [query.text for query in timed if query.typo][:2]),
        },
        "product": product_sum,
        "product_without_signal_updates": bare_sum,
        "floor": floor_sum,
        "product_cpu": common.timing_summary(cpu_times["product"]),
        "product_process_cpu": common.timing_summary(process_times["product"]),
        "floor_cpu": common.timing_summary(cpu_times["floor"]),
        "signal_update_cost": {
            "p50_ms": round(product_sum["p50_ms"] - bare_sum["p50_ms"], 3),
            "p95_ms": round(product_sum["p95_ms"] - bare_sum["p95_ms"], 3),
            "mean_ms": round(product_sum["mean_ms"] - bare_sum["mean_ms"], 3),
            "median_of_paired_differences_ms": round(common.percentile(differences, 0.5) * 1000, 3),
            "share_of_product_p50": round((product_sum["p50_ms"] - bare_sum["p50_ms"]) / product_sum["p50_ms"], 3),
        },
        "ratios": {
            "product_p50_over_floor_p50": round(p50_ratio, 2),
            "product_p95_over_floor_p95": round(p95_ratio, 2),
            "within_3x_of_floor": p50_ratio <= TARGET_FLOOR_RATIO and p95_ratio <= TARGET_FLOOR_RATIO,
        },
        "p95_under_20ms": product_sum["p95_ms"] < TARGET_P95_MS_AT_10000,
        "peak_rss_mb_worker_incl_prefill": worker_rss,
        "checks": {
            "floor_rows_equal_product_sql_rows_first_10_queries": same_rows,
            "recall_executed_events_during_timed_rounds": events,
            "expected_events": 2 * len(timed),
            "signal_rows": signal_rows,
            "signal_recall_count_total": signal_recalls,
        },
    }


# ---------------------------------------------------------------------------------------------------------------
# The search-only child: a process that only searches, to measure its peak RSS.


def search_only(home: Path, workspace: Path, size: int, seed: int, count: int, warmup: int) -> dict[str, object]:
    common.attach(home)
    from memory.domain.enums import Origin
    from memory.services.inputs import Caller
    from memory.services.recall import SearchInput, memory_search

    rss_at_start = common.peak_rss_mb()
    caller = Caller(origin=Origin.CLI, cwd=workspace)
    timed, warm = queries_for(size, seed, count, warmup)
    for query in warm:
        memory_search(data=SearchInput.parse({"query": query.text}), caller=caller)
    seconds, cpu_seconds, process_seconds = [], [], []
    for query in timed:
        started, cpu_started, process_started = time.perf_counter(), time.thread_time(), time.process_time()
        memory_search(data=SearchInput.parse({"query": query.text}), caller=caller)
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.thread_time() - cpu_started)
        process_seconds.append(time.process_time() - process_started)
    return {
        "peak_rss_mb": common.peak_rss_mb(),
        "peak_rss_mb_after_startup_before_searching": rss_at_start,
        "vm_hwm_mb": _status_mb("VmHWM"),
        "rss_mb_at_end": _status_mb("VmRSS"),
        "searches": len(timed) + len(warm),
        "product": common.timing_summary(seconds),
        "product_cpu": common.timing_summary(cpu_seconds),
        "product_process_cpu": common.timing_summary(process_seconds),
    }


def _status_mb(field: str) -> float | None:
    """A field of /proc/self/status in MB (VmHWM: this process image's peak RSS; VmRSS: its RSS now)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


if __name__ == "__main__":
    main()
