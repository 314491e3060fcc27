"""A full reindex of a workspace root holding N memory files (default 10,000), beside a bare parse floor.

    .venv/bin/python bench/reindex_bench.py                 # 10,000 files; the first reindex takes minutes
    .venv/bin/python bench/reindex_bench.py --files 1000

Three reindexes are timed through `memory.services.catalog.catalog_reindex`, the call behind `memory reindex`:
  first    every file is new to the catalog, so each one is first recorded as a hand-edit decision (origin
           `file`) and then indexed: the audit-trail case after files were dropped into a root by hand
  second   the catalog is already in sync: every file is read, parsed and re-derived into its row, and rows that
           came out identical are left alone (the everyday `memory reindex`)
  rebuild  `memory reindex --rebuild`: every row is deleted and inserted again, so both FTS5 tables re-index
           every document

Two floors read every file and parse it: `frontmatter.loads` (python-frontmatter over libyaml's CSafeLoader)
and the product's own strict parser (`parse_document`: the same YAML, plus the pydantic frontmatter model). Each
runs before and after every reindex, so it sees the same background load; the median is the floor. The ratio
target is computed against the bare `frontmatter.loads` floor.

`--text prose` (the default) writes bodies in words with a natural frequency over a fixed synthetic vocabulary;
`--text unique` writes every word once (random 8-letter words), the worst case for the trigram index.
`--text long` writes prose bodies of 2-5 KB (`common.LONG_BODY_BYTES`, several passages each). With
`--whole-bodies` every body is indexed as one chunk (`memory.domain.passages.SPLIT_WORDS` raised past any body):
run both on the same seed to see what cutting long memories into passages costs the index.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_FLOOR_RATIO = 2.0
TARGET_FILES_PER_S = 1000.0


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--files", type=int, default=10_000, help="memory files in the root")
    parser.add_argument("--seed", type=int, default=20240602)
    parser.add_argument("--text", choices=("prose", "unique", "long"), default="prose")
    parser.add_argument("--whole-bodies", action="store_true",
                        help="index every body as one chunk, to compare with passages (same seed)")
    parser.add_argument("--profile", metavar="PATH",
                        help="cProfile each reindex into PATH.first and PATH.second")
    common.main(parser, lambda env, args: run(env, args.files, args.seed, args.profile, args.text,
                                              whole_bodies=args.whole_bodies), home="reindex")


def floor(paths: list[Path]) -> float:
    import frontmatter

    started = time.perf_counter()
    for path in paths:
        post = frontmatter.loads(path.read_text("utf-8"))
        if not post.metadata:
            raise SystemExit(f"floor: {path} has no frontmatter")
    return time.perf_counter() - started


def floor_strict(paths: list[Path]) -> float:
    from memory.domain.document import parse_document

    started = time.perf_counter()
    for path in paths:
        parse_document(path.read_text("utf-8"))
    return time.perf_counter() - started


def run(env: common.Env, count: int, seed: int, profile: str | None, text: str, *,
        whole_bodies: bool = False) -> dict[str, object]:
    from memory.domain.document import render_document
    from memory.domain.enums import MemoryType, Origin, Scope
    from memory.domain.models import Frontmatter, ScopeRef
    from memory.models import CatalogEntry, Chunk, Decision
    from memory.services.catalog import ReindexInput, catalog_reindex
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    resolved = resolve(Selector(), caller, create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    root = resolved.root(ref)
    root.mkdir(parents=True, exist_ok=True)

    if whole_bodies:
        from memory.domain import passages

        passages.SPLIT_WORDS = 10**9  # read at each call: no body is cut
    rng = random.Random(seed)
    words = common.Words(seed) if text == "unique" else common.ProseWords(seed)
    if text == "long":
        low, high = common.LONG_BODY_BYTES

        def make(words: common.ProseWords) -> common.Content:
            # About 80 bytes a line of twelve words, as in common.write_prose_memories.
            return common.prose_content(words, lines=max(1, round(rng.uniform(low, high) / 80)), per_line=12)
    else:
        make = common.prose_content if text == "prose" else common.content
    common.log(f"writing {count} memory files to {root}")
    paths = []
    for _ in range(count):
        item = make(words)
        front = Frontmatter(name=item.name, description=item.description, type=MemoryType.PROJECT,
                            scope=Scope.WORKSPACE)
        path = root / f"project_{common.slug_of(item.name)}.md"
        path.write_text(render_document(front, item.body), "utf-8")
        paths.append(path)
    total_bytes = sum(path.stat().st_size for path in paths)

    def reindex(label: str, **options: object) -> tuple[float, object]:
        common.log(f"{label} reindex of {count} files")
        with common.Profiler(f"{profile}.{label}" if profile else None):
            started = time.perf_counter()
            report = catalog_reindex(data=ReindexInput.parse(dict(options)), caller=caller)
            elapsed = time.perf_counter() - started
        common.log(f"{label} reindex: {elapsed:.2f} s")
        return elapsed, report

    floor_runs = [floor(paths)]
    strict_runs = [floor_strict(paths)]
    first_s, first = reindex("first")
    indexed_after_first = CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()
    floor_runs.append(floor(paths))
    strict_runs.append(floor_strict(paths))
    second_s, second = reindex("second")
    indexed_after_second = CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()
    chunks = Chunk.objects.filter(entry__root_key=ref.root_key).count()
    floor_runs.append(floor(paths))
    strict_runs.append(floor_strict(paths))
    rebuild_s, rebuilt = reindex("rebuild", rebuild=True)
    indexed_after_rebuild = CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()
    floor_runs.append(floor(paths))
    strict_runs.append(floor_strict(paths))

    floor_s = statistics.median(floor_runs)
    floor_fps = count / floor_s
    strict_s = statistics.median(strict_runs)

    def block(seconds: float, report) -> dict[str, object]:
        files_per_s = count / seconds
        return {
            "seconds": round(seconds, 3),
            "files_per_s": round(files_per_s, 1),
            "files": report.files,
            "indexed": report.indexed,
            "external_decisions": report.external_decisions,
            "rows_written": sum(root.rewritten_rows for root in report.roots),
            "invalid": len(report.invalid),
            "floor_files_per_s_over_reindex_files_per_s": round(floor_fps / files_per_s, 2),
            "floor_ratio_target_met": floor_fps / files_per_s <= TARGET_FLOOR_RATIO,
            "at_least_1000_files_per_s": files_per_s >= TARGET_FILES_PER_S,
        }

    return {
        "benchmark": "reindex",
        "machine": common.machine(),
        "files": count,
        "total_bytes": total_bytes,
        "first_reindex_all_new": block(first_s, first),
        "second_reindex_in_sync": block(second_s, second),
        "rebuild_every_row": block(rebuild_s, rebuilt),
        "text": text,
        "whole_bodies": whole_bodies,
        "chunks": chunks,
        "floor_read_and_frontmatter_loads": {
            "seconds_median": round(floor_s, 3),
            "seconds_each_run": [round(value, 3) for value in floor_runs],
            "files_per_s": round(floor_fps, 1),
        },
        "floor_read_and_parse_document": {
            "seconds_median": round(strict_s, 3),
            "seconds_each_run": [round(value, 3) for value in strict_runs],
            "files_per_s": round(count / strict_s, 1),
        },
        "checks": {
            "catalog_rows_after_first": indexed_after_first,
            "catalog_rows_after_second": indexed_after_second,
            "catalog_rows_after_rebuild": indexed_after_rebuild,
            "file_decisions": Decision.objects.filter(origin="file", root_key=ref.root_key).count(),
            "unapplied_decisions": Decision.objects.filter(applied_at__isnull=True).count(),
        },
        "targets": {"floor_ratio_max": TARGET_FLOOR_RATIO, "files_per_s_min": TARGET_FILES_PER_S},
    }


if __name__ == "__main__":
    main()
