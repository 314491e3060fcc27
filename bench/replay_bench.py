"""Replay of N pending decisions (default 1,000), beside a bare apply floor.

    .venv/bin/python bench/replay_bench.py
    .venv/bin/python bench/replay_bench.py --decisions 200

The pending decisions are made the way the controller makes them, minus the apply step: for each new memory,
`rules.decide` against the root's catalog, `core.build_decision`, then `decision_log.persist_decision` (the durable
synchronous=FULL commit). That is exactly the state a writer killed right after `after_decision_commit` leaves
behind, 1,000 times over. Each decision targets its own new file; every word is unique to one memory, so every
verdict must be `add` (checked). Then `memory.controller.replay.replay_pending()` is timed, and afterwards the
script checks that every file exists with the decided content, every decision has `applied_at`, and every
decision has its event.

The floor applies N pending rows of a plain sqlite3 table with nothing of the product around it: per row, one
temp file written, fsync'd, os.replace'd and the directory fsync'd; one catalog row plus one FTS5 (unicode61)
row committed; one event row committed; one `applied_at` update committed (WAL, synchronous=NORMAL, as the
product's apply step). It runs on the same filesystem right after the replay. A second, informational floor
(`floor_plus_index_file`) also rewrites a one-line-per-memory index file atomically per decision, as the
product re-renders MEMORY.md.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--decisions", type=int, default=1000, help="pending decisions to replay")
    parser.add_argument("--seed", type=int, default=20240603)
    parser.add_argument("--profile", metavar="PATH", help="cProfile the replay into PATH")
    common.main(parser, lambda env, args: run(env, args.decisions, args.seed, args.profile), home="replay")


def run(env: common.Env, count: int, seed: int, profile: str | None) -> dict[str, object]:
    from memory.catalog.queries import RootCatalogView
    from memory.controller.core import build_decision, rule_settings
    from memory.controller.decision_log import persist_decision
    from memory.controller.replay import replay_pending
    from memory.controller.rules import decide
    from memory.domain.enums import MemoryType, Op, Origin, RequestKind, Scope
    from memory.domain.models import Candidate, Frontmatter, ScopeRef, sha256_text
    from memory.domain.names import memory_filename
    from memory.models import CatalogEntry, Decision, Event
    from memory.store import files

    caller_cwd = env.workspace
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    resolved = resolve(Selector(), Caller(origin=Origin.CLI, cwd=caller_cwd), create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    root = resolved.root(ref)
    settings = rule_settings(resolved.config)
    view = RootCatalogView(ref.root_key)

    words = common.Words(seed)
    common.log(f"persisting {count} pending decisions")
    verdict_ops: dict[str, int] = {}
    started = time.perf_counter()
    for _ in range(count):
        item = common.content(words)
        front = Frontmatter(name=item.name, description=item.description, type=MemoryType.PROJECT,
                            scope=Scope.WORKSPACE)
        candidate = Candidate(ref=ref, origin=Origin.CLI, kind=RequestKind.WRITE, frontmatter=front, body=item.body,
                              target_filename=memory_filename(MemoryType.PROJECT, item.name))
        verdict = decide(candidate, view, settings)
        verdict_ops[verdict.op.value] = verdict_ops.get(verdict.op.value, 0) + 1
        persist_decision(build_decision(candidate, verdict, root=root))
    persist_s = time.perf_counter() - started
    pending_before = Decision.objects.filter(applied_at__isnull=True).count()
    files_before = len(files.list_document_names(root))

    common.log(f"replaying {pending_before} pending decisions")
    with common.Profiler(profile):
        started = time.perf_counter()
        report = replay_pending()
        replay_s = time.perf_counter() - started
    # replay_pending returns the replayed ids (older versions returned a report object holding them).
    replayed = report if isinstance(report, list) else report.replayed
    common.log(f"replay: {replay_s:.2f} s")

    # Every decision landed: its file holds the decided content, it is stamped, and it has its one event.
    decided = list(Decision.objects.filter(root_key=ref.root_key).values_list("id", "target_filename",
                                                                              "post_content_hash"))
    content_matches = 0
    for _id, filename, post_hash in decided:
        raw = files.read_bytes(root, filename)
        if raw is not None and sha256_text(raw.decode("utf-8")) == post_hash:
            content_matches += 1
    files_after = len(files.list_document_names(root))
    unapplied_after = Decision.objects.filter(applied_at__isnull=True).count()
    events = Event.objects.filter(decision_id__in=[row[0] for row in decided]).count()
    catalog_rows = CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()

    common.log("floors")
    floor_s = floor_run(env.scratch / "plain", count, words)
    indexed_s = floor_run(env.scratch / "index", count, words, index_file=True)

    replay_dps = count / replay_s
    floor_dps = count / floor_s
    indexed_dps = count / indexed_s
    checks = {
        "verdict_ops": verdict_ops,
        "pending_before": pending_before,
        "files_before": files_before,
        "replayed": len(replayed),
        "files_after": files_after,
        "files_with_decided_content": content_matches,
        "unapplied_after": unapplied_after,
        "events_for_these_decisions": events,
        "catalog_rows": catalog_rows,
    }
    ok = (verdict_ops.get(Op.ADD.value, 0) == count and pending_before == count and files_before == 0
          and files_after == count and content_matches == count and unapplied_after == 0 and events == count
          and catalog_rows == count)
    return {
        "benchmark": "replay",
        "machine": common.machine(),
        "decisions": count,
        "persist_pending_seconds": round(persist_s, 3),
        "replay": {"seconds": round(replay_s, 3), "decisions_per_s": round(replay_dps, 1),
                   "ms_per_decision": round(replay_s / count * 1000, 3)},
        "floor": {"seconds": round(floor_s, 3), "decisions_per_s": round(floor_dps, 1),
                  "ms_per_decision": round(floor_s / count * 1000, 3)},
        "floor_plus_index_file": {"seconds": round(indexed_s, 3), "decisions_per_s": round(indexed_dps, 1),
                                  "ms_per_decision": round(indexed_s / count * 1000, 3)},
        "floor_decisions_per_s_over_replay_decisions_per_s": round(floor_dps / replay_dps, 2),
        "floor_plus_index_file_decisions_per_s_over_replay_decisions_per_s": round(indexed_dps / replay_dps, 2),
        "checks": checks,
        "all_checks_pass": ok,
    }


def floor_run(directory: Path, count: int, words: common.Words, *, index_file: bool = False) -> float:
    """With index_file, each apply also rewrites a one-line-per-memory index file atomically, as the product
    re-renders MEMORY.md."""
    files_dir = directory / "memory"
    files_dir.mkdir(parents=True)
    index_lines: list[str] = []
    db = sqlite3.connect(directory / "floor.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(
        """
        CREATE TABLE decisions (id TEXT PRIMARY KEY, target_filename TEXT, name TEXT, description TEXT, body TEXT,
                                post_content TEXT, decided_at INTEGER, applied_at TEXT);
        CREATE INDEX decisions_unapplied ON decisions(applied_at) WHERE applied_at IS NULL;
        CREATE TABLE entries (id INTEGER PRIMARY KEY, filename TEXT UNIQUE, name TEXT, description TEXT,
                              content_hash TEXT);
        CREATE VIRTUAL TABLE fts USING fts5(name, description, body, tokenize="unicode61 remove_diacritics 2");
        CREATE TABLE events (id INTEGER PRIMARY KEY, op TEXT, decision_id TEXT, target TEXT, ts TEXT);
        """
    )
    db.execute("BEGIN IMMEDIATE")
    for index in range(count):
        item = common.content(words)
        filename = f"project_{common.slug_of(item.name)}.md"
        document = (f"---\nname: {item.name}\ndescription: {item.description}\ntype: project\nscope: workspace\n"
                    f"---\n\n{item.body}\n")
        db.execute("INSERT INTO decisions VALUES (?,?,?,?,?,?,?,NULL)",
                   (f"dec{index}", filename, item.name, item.description, item.body, document, index))
    db.execute("COMMIT")

    started = time.perf_counter()
    pending = db.execute("SELECT id, target_filename, name, description, body, post_content FROM decisions "
                         "WHERE applied_at IS NULL ORDER BY decided_at, id").fetchall()
    for decision_id, filename, name, description, body, document in pending:
        data = document.encode("utf-8")
        common.floor_atomic_write(files_dir, filename, data)
        db.execute("BEGIN IMMEDIATE")
        cursor = db.execute("INSERT INTO entries(filename, name, description, content_hash) VALUES (?,?,?,?)",
                            (filename, name, description, hashlib.sha256(data).hexdigest()))
        db.execute("INSERT INTO fts(rowid, name, description, body) VALUES (?,?,?,?)",
                   (cursor.lastrowid, name, description, body))
        db.execute("COMMIT")
        if index_file:
            index_lines.append(f"- [{name}]({filename}) — {description}")
            text = "# Memory Index\n\n" + "\n".join(index_lines) + "\n"
            common.floor_atomic_write(files_dir, "MEMORY.md", text.encode("utf-8"))
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO events(op, decision_id, target, ts) VALUES (?,?,?,?)",
                   ("write.add", decision_id, filename, "2024-01-01T00:00:00Z"))
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE decisions SET applied_at = ? WHERE id = ? AND applied_at IS NULL",
                   ("2024-01-01T00:00:00Z", decision_id))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed


if __name__ == "__main__":
    main()
