"""Sequential controller writes into a workspace scope that already holds N memories, beside a bare floor.

    .venv/bin/python bench/write_bench.py                      # N = 100, 1000, 10000 (the 10k prefill takes minutes)
    .venv/bin/python bench/write_bench.py --sizes 100,1000 --writes 50
    .venv/bin/python bench/write_bench.py --profile /tmp/write.prof   # cProfile of the timed writes, per size

Each size runs in its own worker process with its own fresh COMPOZY_HOME and workspace, prefilled to N. Each
timed write is one `memory_write` service call (the same call the CLI makes), for a new memory whose words appear
in no other memory, so every one must be decided `add`; the ops are counted and reported.

The writes are driven round-robin: one product write at N=100, one floor write at N=100, one product write at
N=1000, one floor write at N=1000, and so on, 200 rounds (the order rotates each round). So every size and every
floor sees the same background load, which matters on a shared 2-core machine where fsync latency swings by 10x
when other processes write.

The floor does the same durable work with nothing of the product around it, per write:
  1. one decisions-like row inserted and committed on a WAL connection with synchronous=FULL
  2. one temp file written, fsync'd, os.replace'd over its target, then the directory fsync'd
  3. one plain catalog-like row plus its rows in two FTS5 tables (unicode61 and trigram, as the catalog has)
     inserted and committed
  4. one line appended to an index file and fsync'd (the product's MEMORY.md append)
  5. one small event row inserted and the decision's applied_at updated, committed together
It runs on the same filesystem, with its tables and directory prefilled to the same N. A second, informational
floor (`floor_plus_index_file`) rewrites the whole N-line index file atomically instead of appending, which is
what a sorted MEMORY.md would cost.

Prefill writes N files straight to disk and runs `catalog_reindex`, which records each new file as a hand-edit
decision and indexes it through the real catalog. Prefill is not timed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_P50_GROWTH = 2.0
TARGET_FLOOR_RATIO = 3.0


def main() -> None:
    parser = common.size_runner_parser(__doc__, sizes="100,1000,10000", seed=20240601,
                                       sizes_help="comma-separated N (memories already in scope)",
                                       profile="cProfile each size's timed writes into PATH.<N>")
    parser.add_argument("--writes", type=int, default=200, help="timed writes per size")
    parser.add_argument("--warmup", type=int, default=5, help="untimed writes per size before the timed rounds")
    common.main(parser, lambda _env, args: coordinate(sorted(common.parse_sizes(args.sizes)), args.writes,
                                                      args.warmup, args.seed, args.profile),
                worker=lambda args: worker(args.worker, args.seed, args.warmup, args.profile))


# ---------------------------------------------------------------------------------------------------------------
# The coordinator: starts one worker per size, prefills the floors, drives the rounds. It never imports Django.


class Worker:
    def __init__(self, size: int, seed: int, warmup: int, profile: str | None) -> None:
        command = [sys.executable, __file__, "--worker", str(size), "--seed", str(seed + size),
                   "--warmup", str(warmup)]
        if profile:
            command += ["--profile", f"{profile}.{size}"]
        self.size = size
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        bufsize=1)

    def send(self, command: str) -> dict[str, object]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.receive()

    def receive(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"worker N={self.size} died (exit code {self.process.wait()})")
        return json.loads(line)


def coordinate(sizes: list[int], writes: int, warmup: int, seed: int, profile: str | None) -> dict[str, object]:
    scratch = Path(tempfile.mkdtemp(prefix="compozy-bench-write-floor-"))
    workers: list[Worker] = []
    try:
        common.log(f"starting {len(sizes)} workers; prefill of N={sizes} runs in parallel")
        workers = [Worker(size, seed, warmup, profile) for size in sizes]
        words = common.Words(seed - 1)
        floors = {size: Floor(scratch / f"n{size}", size, words, index_file=False) for size in sizes}
        indexed_floors = {size: Floor(scratch / f"n{size}-index", size, words, index_file=True) for size in sizes}
        ready = {worker.size: worker.receive() for worker in workers}
        common.log("all workers prefilled")
        for floor in [*floors.values(), *indexed_floors.values()]:
            for _ in range(warmup):
                floor.one()

        product_s: dict[int, list[float]] = {size: [] for size in sizes}
        floor_s: dict[int, list[float]] = {size: [] for size in sizes}
        indexed_s: dict[int, list[float]] = {size: [] for size in sizes}
        ops: dict[int, dict[str, int]] = {size: {} for size in sizes}
        by_size = {worker.size: worker for worker in workers}
        for round_number in range(writes):
            shift = round_number % len(sizes)
            for size in sizes[shift:] + sizes[:shift]:
                reply = by_size[size].send("write")
                product_s[size].append(float(reply["seconds"]))
                op = str(reply["op"])
                ops[size][op] = ops[size].get(op, 0) + 1
                floor_s[size].append(floors[size].one())
                indexed_s[size].append(indexed_floors[size].one())
            if (round_number + 1) % 50 == 0:
                common.log(f"round {round_number + 1}/{writes}")
        finals = {worker.size: worker.send("done") for worker in workers}
        for worker in workers:
            worker.process.wait()
        for floor in [*floors.values(), *indexed_floors.values()]:
            floor.close()
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)

    results: dict[str, object] = {}
    for size in sizes:
        product = common.latency_summary(product_s[size], counting="writes")
        floor = common.latency_summary(floor_s[size], counting="writes")
        indexed = common.latency_summary(indexed_s[size], counting="writes")
        before = int(ready[size]["in_scope"])
        after = int(finals[size]["in_scope"])
        adds = ops[size].get("add", 0)
        results[str(size)] = {
            "memories_in_scope_before_timed_writes": before,
            "memories_in_scope_after": after,
            "prefill": ready[size]["prefill"],
            "warmup_ops": ready[size]["warmup_ops"],
            "timed_writes": writes,
            "ops": ops[size],
            "add_count": adds,
            "all_timed_writes_added": adds == writes and after - before == writes,
            "product": product,
            "floor": floor,
            "floor_plus_index_file": indexed,
            "floor_writes_per_s_over_product_writes_per_s": round(floor["writes_per_s"] / product["writes_per_s"], 2),
            "product_p50_over_floor_p50": round(product["p50_ms"] / floor["p50_ms"], 2),
            "floor_plus_index_file_writes_per_s_over_product_writes_per_s": round(
                indexed["writes_per_s"] / product["writes_per_s"], 2),
            "decisions_total": finals[size]["decisions"],
            "controller_mode": ready[size]["controller_mode"],
        }
    smallest, largest = str(sizes[0]), str(sizes[-1])
    growth = results[largest]["product"]["p50_ms"] / results[smallest]["product"]["p50_ms"]
    floor_growth = results[largest]["floor"]["p50_ms"] / results[smallest]["floor"]["p50_ms"]
    ratios = {size: block["floor_writes_per_s_over_product_writes_per_s"] for size, block in results.items()}
    return {
        "benchmark": "write",
        "machine": common.machine(),
        "sizes": sizes,
        "results": results,
        "summary": {
            f"p50_at_{largest}_over_p50_at_{smallest}": round(growth, 2),
            "p50_growth_target": TARGET_P50_GROWTH,
            "p50_growth_target_met": growth <= TARGET_P50_GROWTH,
            f"floor_p50_at_{largest}_over_floor_p50_at_{smallest}": round(floor_growth, 2),
            "floor_ratio_by_size": ratios,
            "floor_ratio_target": TARGET_FLOOR_RATIO,
            "floor_ratio_target_met_by_size": {size: ratio <= TARGET_FLOOR_RATIO for size, ratio in ratios.items()},
            "every_timed_write_was_add": all(block["all_timed_writes_added"] for block in results.values()),
        },
    }


# ---------------------------------------------------------------------------------------------------------------
# A worker: one COMPOZY_HOME, one workspace holding N memories; answers "write" and "done" on stdin, one JSON
# line per answer on stdout. Progress and profiles go to stderr.


def worker(size: int, seed: int, warmup: int, profile: str | None) -> None:
    env = common.start(f"write-n{size}")
    try:
        _serve(env, size, seed, warmup, profile)
    finally:
        common.finish()


def _reply(payload: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _serve(env: common.Env, size: int, seed: int, warmup: int, profile: str | None) -> None:
    from memory.domain.document import render_document
    from memory.domain.enums import MemoryType, Origin, Scope
    from memory.domain.models import Frontmatter, ScopeRef
    from memory.models import CatalogEntry, Decision
    from memory.services.catalog import ReindexInput, catalog_reindex
    from memory.services.inputs import Caller, Selector
    from memory.services.memories import WriteInput, memory_write
    from memory.services.resolution import resolve

    words = common.Words(seed)
    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    resolved = resolve(Selector(), caller, create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    root = resolved.root(ref)
    root.mkdir(parents=True, exist_ok=True)

    def in_scope() -> int:
        return CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()

    # Prefill: N files straight to disk, then one reindex through the real catalog (each file a hand-edit
    # decision). Not timed.
    started = time.perf_counter()
    for _ in range(size):
        item = common.content(words)
        front = Frontmatter(name=item.name, description=item.description, type=MemoryType.PROJECT,
                            scope=Scope.WORKSPACE)
        (root / f"project_{common.slug_of(item.name)}.md").write_text(render_document(front, item.body), "utf-8")
    report = catalog_reindex(data=ReindexInput.parse({}), caller=caller)
    prefill_s = time.perf_counter() - started
    if in_scope() != size:
        raise SystemExit(f"prefill ended with {in_scope()} memories in scope, wanted {size}")
    common.log(f"N={size}: prefill done in {prefill_s:.1f} s")

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()

    def one_write(timed: bool) -> tuple[float, str]:
        item = common.content(words)
        data = WriteInput.parse({"type": "project", "name": item.name, "description": item.description,
                                 "content": item.body})
        if timed and profiler is not None:
            profiler.enable()
        started = time.perf_counter()
        outcome = memory_write(data=data, caller=caller)
        elapsed = time.perf_counter() - started
        if timed and profiler is not None:
            profiler.disable()
        return elapsed, outcome.decision.op

    warm_ops: dict[str, int] = {}
    for _ in range(warmup):
        op = one_write(timed=False)[1]
        warm_ops[op] = warm_ops.get(op, 0) + 1
    _reply({
        "in_scope": in_scope(),
        "prefill": {"files": size, "seconds": round(prefill_s, 2), "external_decisions": report.external_decisions},
        "warmup_ops": warm_ops,
        "controller_mode": resolved.config.memory.controller.mode,
    })
    for line in sys.stdin:
        command = line.strip()
        if command == "write":
            elapsed, op = one_write(timed=True)
            _reply({"seconds": elapsed, "op": op})
        elif command == "done":
            if profiler is not None:
                common.dump_profile(profiler, profile, f"the timed writes at N={size}")
            _reply({"in_scope": in_scope(), "decisions": Decision.objects.count()})
            return


# ---------------------------------------------------------------------------------------------------------------
# The floor: the same fsyncs, renames and inserts, with plain sqlite3 and os calls.

FLOOR_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id TEXT PRIMARY KEY, candidate_hash TEXT, idempotency_key TEXT UNIQUE, root_key TEXT, op TEXT,
    target_filename TEXT, frontmatter TEXT, post_content TEXT, post_content_hash TEXT, rule_trace TEXT,
    decided_at TEXT, applied_at TEXT);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY, root_key TEXT, filename TEXT, name TEXT, description TEXT, content_hash TEXT,
    UNIQUE(root_key, filename));
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(name, description, body, tokenize="unicode61 remove_diacritics 2");
CREATE VIRTUAL TABLE IF NOT EXISTS fts_trigram USING fts5(name, description, body, tokenize="trigram");
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, op TEXT, decision_id TEXT, target TEXT, ts TEXT);
"""


class Floor:
    """The bare loop, prefilled to the same N: files in its directory and rows in every table.

    Each write appends one line to an index file and fsyncs it (the product's MEMORY.md append). With index_file,
    it instead rewrites the whole index atomically: what a sorted, re-rendered MEMORY.md would cost.
    """

    def __init__(self, directory: Path, size: int, words: common.Words, *, index_file: bool) -> None:
        self.words = words
        self.rewrite_index = index_file
        self.index_lines: list[str] = []
        self.files_dir = directory / "memory"
        self.files_dir.mkdir(parents=True)
        db_path = directory / "floor.db"
        self.full = sqlite3.connect(db_path, isolation_level=None)
        self.full.execute("PRAGMA journal_mode=WAL")
        self.full.executescript(FLOOR_SCHEMA)
        self.full.execute("PRAGMA synchronous=FULL")
        self.normal = sqlite3.connect(db_path, isolation_level=None)
        self.normal.execute("PRAGMA synchronous=NORMAL")
        self.count = 0
        self.normal.execute("BEGIN IMMEDIATE")
        for index in range(size):
            filename, name, description, body = self._item()
            (self.files_dir / filename).write_text(self._document(name, description, body), "utf-8")
            cursor = self.normal.execute(
                "INSERT INTO entries(root_key, filename, name, description, content_hash) VALUES (?,?,?,?,?)",
                ("workspace:floor", filename, name, description, ""))
            self.normal.execute("INSERT INTO fts(rowid, name, description, body) VALUES (?,?,?,?)",
                                (cursor.lastrowid, name, description, body))
            self.normal.execute("INSERT INTO fts_trigram(rowid, name, description, body) VALUES (?,?,?,?)",
                                (cursor.lastrowid, name, description, body))
            self.normal.execute("INSERT INTO decisions(id, idempotency_key, op, target_filename, post_content, "
                                "decided_at) VALUES (?,?,?,?,?,?)",
                                (f"pre{index}", f"pre{index}", "add", filename, body, ""))
            self.index_lines.append(f"- [{name}]({filename}) — {description}")
        self.normal.execute("COMMIT")
        (self.files_dir / "MEMORY.md").write_text("# Memory Index\n\n" + "\n".join(self.index_lines) + "\n")

    def _item(self) -> tuple[str, str, str, str]:
        item = common.content(self.words)
        return f"project_{common.slug_of(item.name)}.md", item.name, item.description, item.body

    @staticmethod
    def _document(name: str, description: str, body: str) -> str:
        return f"---\nname: {name}\ndescription: {description}\ntype: project\nscope: workspace\n---\n\n{body}\n"

    def one(self) -> float:
        """One write; returns its seconds."""
        self.count += 1
        index = self.count
        filename, name, description, body = self._item()
        document = self._document(name, description, body)
        digest = hashlib.sha256(document.encode()).hexdigest()
        trace = json.dumps([{"name": "normalize", "passed": True, "reason": "ok", "target": filename}] * 5)
        started = time.perf_counter()
        # 1. The decision row, durable before the file (synchronous=FULL fsyncs the WAL at commit).
        self.full.execute("BEGIN IMMEDIATE")
        self.full.execute(
            "INSERT INTO decisions VALUES (?,?,?,?,?,?,?,?,?,?,?,NULL)",
            (f"dec{index}", digest, f"key{index}", "workspace:floor", "add", filename,
             json.dumps({"name": name}), document, digest, trace, "2024-01-01T00:00:00Z"),
        )
        self.full.execute("COMMIT")
        # 2. The atomic file write.
        common.floor_atomic_write(self.files_dir, filename, document.encode("utf-8"))
        # 3. The catalog row and its FTS5 row, one transaction.
        self.normal.execute("BEGIN IMMEDIATE")
        cursor = self.normal.execute(
            "INSERT INTO entries(root_key, filename, name, description, content_hash) VALUES (?,?,?,?,?)",
            ("workspace:floor", filename, name, description, digest),
        )
        self.normal.execute("INSERT INTO fts(rowid, name, description, body) VALUES (?,?,?,?)",
                            (cursor.lastrowid, name, description, body))
        self.normal.execute("INSERT INTO fts_trigram(rowid, name, description, body) VALUES (?,?,?,?)",
                            (cursor.lastrowid, name, description, body))
        self.normal.execute("COMMIT")
        # 4. The index file: one appended line, or (informational variant) the whole file rewritten.
        line = f"- [{name}]({filename}) — {description}"
        self.index_lines.append(line)
        if self.rewrite_index:
            text = "# Memory Index\n\n" + "\n".join(self.index_lines) + "\n"
            common.floor_atomic_write(self.files_dir, "MEMORY.md", text.encode("utf-8"))
        else:
            fd = os.open(self.files_dir / "MEMORY.md", os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, (line + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        # 5. The event row and applied_at, one transaction.
        self.normal.execute("BEGIN IMMEDIATE")
        self.normal.execute("INSERT INTO events(op, decision_id, target, ts) VALUES (?,?,?,?)",
                            ("write.add", f"dec{index}", filename, "2024-01-01T00:00:00Z"))
        self.normal.execute("UPDATE decisions SET applied_at = ? WHERE id = ?", ("2024-01-01T00:00:01Z", f"dec{index}"))
        self.normal.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self.full.close()
        self.normal.close()


if __name__ == "__main__":
    main()
