"""The crash window, made permanent: N real processes, each doing one random operation and killed with SIGKILL.

    .venv/bin/python bench/crash_loop.py                       # 1,000 iterations
    .venv/bin/python bench/crash_loop.py --iterations 50 --seed 7

Each iteration starts one worker process (`tests/crash/writer.py --op ...`, the crash tests' writer) on the same
COMPOZY_HOME and workspace (a git checkout). The worker boots like every CLI process (migrate check, then replay of
whatever the previous, killed worker left), checks the invariants (`tests/crash/invariants.py`) and prints them,
then does one random operation: write, edit, delete, revert, batch propose (two body operations on one document),
or reindex after a hand edit the worker makes on disk first, once it has checked (a new file, a changed body
or a removed file).

The operation is killed in one of two ways, chosen at random:
- at a controller step boundary: COMPOZY_FAULT=<step> with COMPOZY_FAULT_SIGNAL=KILL, so the worker sends itself SIGKILL
  exactly there (after_decision_commit, after_temp_write, after_rename, after_reindex, before_applied). This is
  the window random kills almost never hit: between a decision's commit and its apply.
- at a random moment: the script sends SIGKILL 0 to 250 ms after the worker says it is about to start.
A worker whose operation does not pass its fault step (a noop decision writes no file) completes; that is counted.

Two faults of the environment, chosen like the others:
- disk_full: the workspace lives on a tmpfs mounted here; before the worker starts, a filler file fills it, so the
  worker's start-up replay and its operation meet ENOSPC. Its answer must be a clean refusal
  (memory.storage.full, memory.decision.pending) or a success; the filler is removed after it exits and the next
  worker's replay must apply whatever waited. Not drawn for a reindex (its hand edit would itself need the disk).
  What a worker's check finds on the full disk (a decision held there, unapplied) is counted apart
  (held_while_disk_full): the next worker, with space back, checks that nothing was lost.
  Where no tmpfs can be mounted, the JSON says why under "disk_full" and the fault is not drawn.
- db_locked: once the worker has booted and checked, this script holds the database with its own write
  transaction (BEGIN IMMEDIATE) for 0-1 s, or for 5.5 s (past SQLite's 5 s busy timeout) one time in five, while
  the worker operates. The answer must be a success or memory.controller.timeout, never an error.

Workers are forked from this script after it has imported Django and the services once (`--spawn` execs a fresh
interpreter per worker instead, about 1 s more per iteration): each fork is its own process with its own database
connections, opened by its own bootstrap, and is killed for real. Only the import of the code is shared.

After the last iteration one more worker replays and checks. The script prints one JSON document: iterations,
operations, kills per step, completions, refusals (409s and the like, which are answers, not failures), worker
errors (any other exit) and every violation with the iteration that left it. The floor is the time a bare worker
takes to boot and check (`--op check`), measured at the start: an iteration costs about one floor plus its op.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Its sibling `common` by name, as every bench imports it, also when a test imports this file as bench.crash_loop.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (puts the repository root on the path)

from memory.controller.faults import STEPS  # noqa: E402  (pure Python, no Django)

WORKER = common.ROOT / "tests" / "crash" / "writer.py"

OPS = ("write", "edit", "delete", "revert", "propose", "reindex")
# A delete unlinks (no temp file); a reindex records hand edits in one batch (no per-file write of its own).
OP_STEPS = {op: STEPS for op in OPS}
OP_STEPS["delete"] = tuple(s for s in STEPS if s != "after_temp_write")
OP_STEPS["reindex"] = ("after_decision_commit", "after_reindex", "before_applied")
RANDOM = "random_moment"
# (exit code, the violations its start-up check found, its op summary or None, stderr tail)
WorkerResult = tuple[int, list[str], dict[str, Any] | None, str]
DISK_FULL = "disk_full"
DB_LOCKED = "db_locked"
# Past compozy/settings.py's busy_timeout (5,000 ms): the worker's write must give up with a stable code.
LOCK_PAST_BUSY_TIMEOUT = 5.5


def worker_env(home: Path, fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOZY_")}
    env["COMPOZY_HOME"] = str(home)
    if fault:
        env["COMPOZY_FAULT"] = fault
        env["COMPOZY_FAULT_SIGNAL"] = "KILL"
    return env


def run_worker(home: Path, workspace: Path, op: str, seed: int, *, fault: str | None, kill_after: float | None,
               finish_reindex: bool, hold_lock: float | None = None) -> WorkerResult:
    """(exit code, the violations its start-up check found, its op summary or None, stderr tail)."""
    args = [sys.executable, str(WORKER), "--workspace", str(workspace), "--op", op, "--seed", str(seed),
            "--writer-id", str(seed % 26)]
    if finish_reindex:
        args.append("--finish-reindex")
    if kill_after is not None or hold_lock is not None:
        args.append("--handshake")
    proc = subprocess.Popen(args, cwd=workspace, env=worker_env(home, fault), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    found: list[str] = []
    summary = None
    first = proc.stdout.readline()
    if first.startswith("{"):
        found = json.loads(first)["violations"]
    if hold_lock is not None and first and proc.stdout.readline().strip() == "READY":
        with database_held(home):
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(hold_lock)
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


@contextlib.contextmanager
def database_held(home: Path) -> Iterator[None]:
    """Another process's write transaction on the home's database, as a second tool holding it would."""
    connection = sqlite3.connect(home / "compozy.db", isolation_level=None, timeout=30)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
    finally:
        connection.execute("ROLLBACK")
        connection.close()


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem says it is full."""
    filler = directory / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


def mount_tmpfs(target: Path, size: str = "64m") -> str | None:
    """Mount a tmpfs at `target`; None when done, else why not (the disk_full fault is then not drawn)."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                              capture_output=True, text=True)
    except OSError as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def fork_worker(home: Path, workspace: Path, op: str, seed: int, *, fault: str | None, kill_after: float | None,
                finish_reindex: bool, hold_lock: float | None = None) -> WorkerResult:
    """The same worker as `run_worker`, forked from this already-imported process instead of exec'd."""
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    err = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the worker is reaped
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            os.close(out_r)
            os.close(go_w)
            os.dup2(out_w, 1)
            os.dup2(go_r, 0)
            os.dup2(err.fileno(), 2)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the handshake line comes from the parent
            for key in ("COMPOZY_FAULT", "COMPOZY_FAULT_SIGNAL"):
                os.environ.pop(key, None)
            if fault:
                os.environ["COMPOZY_FAULT"] = fault
                os.environ["COMPOZY_FAULT_SIGNAL"] = "KILL"
            from memory.bootstrap import bootstrap

            bootstrap()
            from writer import run_op

            run_op(argparse.Namespace(workspace=str(workspace), op=op, seed=str(seed), writer_id=seed % 26,
                                      finish_reindex=finish_reindex,
                                      handshake=kill_after is not None or hold_lock is not None))
        except BaseException:  # noqa: BLE001 - reported to the parent as a worker error
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    os.close(go_r)
    found: list[str] = []
    summary = None
    with os.fdopen(out_r) as lines, os.fdopen(go_w, "w") as go:
        first = lines.readline()
        if first.startswith("{"):
            found = json.loads(first)["violations"]
        if hold_lock is not None and first and lines.readline().strip() == "READY":
            with database_held(home):
                go.write("go\n")
                go.flush()
                time.sleep(hold_lock)
        if kill_after is not None and first and lines.readline().strip() == "READY":
            go.write("go\n")
            go.flush()
            time.sleep(kill_after)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        rest = lines.read()
    _pid, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    for line in rest.splitlines():
        if line.startswith("{"):
            summary = json.loads(line)
    err.seek(0)
    stderr = err.read().decode("utf-8", "replace")[-2000:]
    err.close()
    return code, found, summary, stderr


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


def plan(iterations: int, rng: random.Random, *, disk_full: bool = True) -> list[tuple[str, str, float | None]]:
    """(operation, its fault, a delay: when a random-moment kill comes, or how long the database is held): fixed
    by the seed (and whether a tmpfs could be mounted) alone."""
    steps = []
    for _ in range(iterations):
        op = rng.choice(OPS)
        faults = (*OP_STEPS[op], RANDOM, DB_LOCKED, *((DISK_FULL,) if disk_full and op != "reindex" else ()))
        step = rng.choice(faults)
        delay = None
        if step == RANDOM:
            delay = rng.uniform(0, 0.25)
        elif step == DB_LOCKED:
            delay = LOCK_PAST_BUSY_TIMEOUT if rng.random() < 0.2 else rng.uniform(0, 1)
        steps.append((op, step, delay))
    return steps


def prepare_fork(home: Path) -> None:
    """Import Django and the services once, here, without opening the database: every fork starts from this."""
    os.environ["COMPOZY_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    for key in ("COMPOZY_FAULT", "COMPOZY_FAULT_SIGNAL", "COMPOZY_WORKSPACE"):
        os.environ.pop(key, None)
    sys.path.insert(0, str(WORKER.parent))
    import django

    django.setup()
    import writer  # noqa: F401

    import memory.services.catalog  # noqa: F401
    import memory.services.decisions  # noqa: F401
    import memory.services.memories  # noqa: F401
    import memory.services.propose  # noqa: F401


def crash_loop(iterations: int, seed: int, base: Path, *, spawn: bool = False) -> dict[str, Any]:
    global run_worker
    rng = random.Random(seed)
    home = base / "home"
    disk = base / "disk"
    no_tmpfs = mount_tmpfs(disk)
    workspace = (base if no_tmpfs else disk) / "project"
    (workspace / ".git").mkdir(parents=True)
    home.mkdir(mode=0o700)
    if not spawn:
        prepare_fork(home)
        run_worker = fork_worker
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
    deferred = 0
    while_full: list[dict[str, Any]] = []
    steps = plan(iterations, rng, disk_full=no_tmpfs is None)
    for iteration, (op, step, delay) in enumerate(steps, start=1):
        # A killed reindex is finished by the next worker before it checks (a person rerunning it): that rerun
        # needs the disk, so the fill waits for an iteration with nothing left to finish.
        filler = fill(disk) if step == DISK_FULL and not finish_reindex else None
        if step == DISK_FULL and filler is None:
            deferred += 1
        try:
            code, found, summary, stderr = run_worker(
                home, workspace, op, seed * 100_000 + iteration,
                fault=step if step in STEPS else None, kill_after=delay if step == RANDOM else None,
                hold_lock=delay if step == DB_LOCKED else None, finish_reindex=finish_reindex)
        finally:
            if filler is not None:
                filler.unlink()
        if filler is not None:
            # Checked on a full disk: a decision the previous worker left is held there, unapplied, by design.
            # Whether anything was lost is what the next worker, with space back, checks (and the final check).
            while_full.extend({"after_iteration": iteration - 1, "found": v} for v in found)
        else:
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
                # A refused reindex (the database held past the busy timeout) leaves its hand edit unrecorded,
                # as a killed one does: the person reruns it.
                finish_reindex = op == "reindex"
        else:
            errors.append({"iteration": iteration, "op": op, "step": step, "exit": code, "stderr": stderr[-600:]})
            finish_reindex = op == "reindex"
    code, found, _summary, stderr = run_worker(home, workspace, "check", 0, fault=None, kill_after=None,
                                               finish_reindex=finish_reindex)
    if code != 0:
        errors.append({"iteration": "final", "exit": code, "stderr": stderr[-600:]})
    violations.extend({"after_iteration": iterations, "violation": v} for v in found)
    elapsed = time.perf_counter() - started
    if no_tmpfs is None:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    return {
        "iterations": iterations,
        "seed": seed,
        "workers": "exec" if spawn else "fork",
        "ops": dict(sorted(ops.items())),
        "planned_per_step": dict(Counter(step for _op, step, _delay in steps)),
        "kills_per_step": {step: kills[step] for step in (*STEPS, RANDOM)},
        "disk_full": "tmpfs" if no_tmpfs is None else f"not drawn: no tmpfs ({no_tmpfs})",
        "disk_full_not_filled_pending_reindex": deferred,
        "held_while_disk_full": len(while_full),
        "held_while_disk_full_examples": while_full[:3],
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
    parser = common.parser(__doc__)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--spawn", action="store_true", help="exec a fresh interpreter per worker (slower)")
    parser.add_argument("--keep", action="store_true", help="keep the temp home and workspace for inspection")
    # The loop builds its own home and workspace (on a tmpfs when it can mount one, for the disk_full fault), so
    # common.main only records the commit measured; a violation or a worker error fails the run.
    common.main(parser, measure, exit_code=lambda result: 1 if result["violations"] or result["errors"] else 0)


def measure(_env: None, args: argparse.Namespace) -> dict[str, Any]:
    return common.in_own_temp_dir("crash-loop", args.keep,
                                  lambda base: crash_loop(args.iterations, args.seed, base, spawn=args.spawn))


if __name__ == "__main__":
    main()
