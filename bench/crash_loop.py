"""The crash window, made permanent: N real processes, each doing one random operation and killed with SIGKILL.

    .venv/bin/python bench/crash_loop.py                       # 1,000 iterations
    .venv/bin/python bench/crash_loop.py --iterations 50 --seed 7

Each iteration starts one worker process (`tests/crash/writer.py --op ...`, the crash tests' writer) on the same
COMPOZY_HOME and workspace (a git checkout). The worker boots like every CLI process (migrate check, then replay of
whatever the previous, killed worker left), checks the invariants (`tests/crash/invariants.py`) and prints them,
then does one random operation: write, edit, delete, revert, batch propose (two body operations on one document),
or reindex after a hand edit the script makes on disk first (a new file, a changed body or a removed file).

The operation is killed in one of two ways, chosen at random:
- at a controller step boundary: COMPOZY_FAULT=<step> with COMPOZY_FAULT_SIGNAL=KILL, so the worker sends itself SIGKILL
  exactly there (after_decision_commit, after_temp_write, after_rename, after_reindex, before_applied). This is
  the window random kills almost never hit: between a decision's commit and its apply.
- at a random moment: the script sends SIGKILL 0 to 250 ms after the worker says it is about to start.
A worker whose operation does not pass its fault step (a noop decision writes no file) completes; that is counted.

After the last iteration one more worker replays and checks. The script prints one JSON document: iterations,
operations, kills per step, completions, refusals (409s and the like, which are answers, not failures), worker
errors (any other exit) and every violation with the iteration that left it. The floor is the time a bare worker
takes to boot and check (`--op check`), measured at the start: an iteration costs about one floor plus its op.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "crash" / "writer.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memory.controller.faults import STEPS  # noqa: E402  (pure Python, no Django)

OPS = ("write", "edit", "delete", "revert", "propose", "reindex")
# A delete unlinks (no temp file); a reindex records hand edits in one batch (no per-file write of its own).
OP_STEPS = {op: STEPS for op in OPS}
OP_STEPS["delete"] = tuple(s for s in STEPS if s != "after_temp_write")
OP_STEPS["reindex"] = ("after_decision_commit", "after_reindex", "before_applied")
RANDOM = "random_moment"


def worker_env(home: Path, fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    if fault:
        env["COMPOZY_FAULT"] = fault
        env["COMPOZY_FAULT_SIGNAL"] = "KILL"
    return env


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


def run_worker(home: Path, workspace: Path, op: str, seed: int, *, fault: str | None, kill_after: float | None,
               finish_reindex: bool) -> tuple[int, list[str], dict[str, Any] | None, str]:
    """(exit code, the violations its start-up check found, its op summary or None, stderr tail)."""
    args = [sys.executable, str(WORKER), "--workspace", str(workspace), "--op", op, "--seed", str(seed),
            "--writer-id", str(seed % 26)]
    if finish_reindex:
        args.append("--finish-reindex")
    if kill_after is not None:
        args.append("--handshake")
    proc = subprocess.Popen(args, cwd=workspace, env=worker_env(home, fault), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    found: list[str] = []
    summary = None
    first = proc.stdout.readline()
    if first.startswith("{"):
        found = json.loads(first)["violations"]
    if kill_after is not None and first and proc.stdout.readline().strip() == "READY":
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(kill_after)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=300)
    for line in stdout.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    return proc.returncode, found, summary, stderr[-2000:]


def check_floor(home: Path, workspace: Path, samples: int = 3) -> float:
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        code, _found, _summary, stderr = run_worker(home, workspace, "check", 0, fault=None, kill_after=None,
                                                    finish_reindex=False)
        if code != 0:
            raise RuntimeError(f"the check worker failed:\n{stderr}")
        timings.append(time.perf_counter() - started)
    return sorted(timings)[len(timings) // 2]


def plan(iterations: int, rng: random.Random) -> list[tuple[str, str, float | None]]:
    """(operation, where to kill it, the delay of a random-moment kill): fixed by the seed alone."""
    steps = []
    for _ in range(iterations):
        op = rng.choice(OPS)
        step = rng.choice((*OP_STEPS[op], RANDOM))
        steps.append((op, step, rng.uniform(0, 0.25) if step == RANDOM else None))
    return steps


def crash_loop(iterations: int, seed: int, base: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    edits = random.Random(seed + 1)  # hand edits depend on what is on disk: their own stream keeps the plan fixed
    home = base / "home"
    workspace = base / "project"
    (workspace / ".git").mkdir(parents=True)
    home.mkdir(mode=0o700)
    ops: Counter[str] = Counter()
    kills: Counter[str] = Counter()
    completed: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    errors: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []

    # Material to edit, delete and revert, written without faults.
    for index in range(4):
        code, _found, _summary, stderr = run_worker(home, workspace, "write", seed * 1000 + index, fault=None,
                                                    kill_after=None, finish_reindex=False)
        if code != 0:
            raise RuntimeError(f"seeding failed:\n{stderr}")
    floor = check_floor(home, workspace)

    started = time.perf_counter()
    finish_reindex = False
    for iteration, (op, step, kill_after) in enumerate(plan(iterations, rng), start=1):
        if op == "reindex":
            hand_edit(workspace, edits, iteration)
        code, found, summary, stderr = run_worker(
            home, workspace, op, seed * 100_000 + iteration, fault=None if step == RANDOM else step,
            kill_after=kill_after, finish_reindex=finish_reindex)
        violations.extend({"after_iteration": iteration - 1, "violation": v} for v in found)
        ops[op] += 1
        if code == -signal.SIGKILL:
            kills[step] += 1
            # A killed reindex leaves the hand edit unrecorded: the next process runs reindex again, as a user
            # would, before it checks. (A hand edit nobody reindexed is drift by design, not a lost write.)
            finish_reindex = op == "reindex"
        elif code == 0:
            completed[step] += 1
            finish_reindex = False
            if summary and summary.get("error"):
                refusals[f"{summary['op']}:{summary['error']}:{summary.get('reason')}"] += 1
        else:
            errors.append({"iteration": iteration, "op": op, "step": step, "exit": code, "stderr": stderr[-600:]})
            finish_reindex = op == "reindex"
    code, found, _summary, stderr = run_worker(home, workspace, "check", 0, fault=None, kill_after=None,
                                               finish_reindex=finish_reindex)
    if code != 0:
        errors.append({"iteration": "final", "exit": code, "stderr": stderr[-600:]})
    violations.extend({"after_iteration": iterations, "violation": v} for v in found)
    elapsed = time.perf_counter() - started
    return {
        "iterations": iterations,
        "seed": seed,
        "ops": dict(sorted(ops.items())),
        "planned_per_step": dict(Counter(step for _op, step, _delay in plan(iterations, random.Random(seed)))),
        "kills_per_step": {step: kills[step] for step in (*STEPS, RANDOM)},
        "kills": sum(kills.values()),
        "completed_before_their_step": dict(sorted(completed.items())),
        "refusals": dict(sorted(refusals.items())),
        "errors": errors,
        "violations": violations,
        "violation_count": len(violations),
        "elapsed_seconds": round(elapsed, 1),
        "per_iteration_ms": round(1000 * elapsed / max(iterations, 1), 1),
        "floor_boot_and_check_ms": round(1000 * floor, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--keep", action="store_true", help="keep the temp home and workspace for inspection")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="compozy-crash-loop-"))
    try:
        result = crash_loop(args.iterations, args.seed, base)
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    if args.keep:
        result["kept"] = str(base)
    print(json.dumps(result, indent=2))
    sys.exit(1 if result["violations"] or result["errors"] else 0)


if __name__ == "__main__":
    main()
