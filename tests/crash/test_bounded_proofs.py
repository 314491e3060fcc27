"""The crash loop and the soak, bounded, so a regression fails the suite (the full runs are in docs/benchmarks.md).

- 50 iterations of bench/crash_loop.py: real worker processes doing a random operation (write, edit, delete,
  revert, batch propose, reindex after a hand edit), SIGKILLed at a controller step or at a random moment, or
  meeting a database another process holds or a full disk, each
  followed by a start-up (replay) and the invariants of tests/crash/invariants.py. The seed's plan covers every
  operation and every kill point.
- 20 seconds of bench/soak.py: CLI, TCP, socket, MCP over stdio and the task cluster's reindex at once, with no
  error, a healthy home and no invariant violation at the end.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

from tests.conftest import REPO
from tests.helpers import workspace_root

sys.path.insert(0, str(REPO / "bench"))

from crash_loop import DB_LOCKED, DISK_FULL, OPS, RANDOM, STEPS, plan  # noqa: E402

ITERATIONS = 50
SEED = 2  # its plan covers every operation and every kill point (checked below, before the run)


def run_bench(script: str, *args: str, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / script), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{"):])


def test_a_bounded_crash_loop_kills_every_kind_of_operation_at_every_step_and_loses_nothing():
    planned = plan(ITERATIONS, random.Random(SEED))
    assert {op for op, _step, _delay in planned} == set(OPS)
    assert {step for _op, step, _delay in planned} == {*STEPS, RANDOM, DB_LOCKED, DISK_FULL}
    result = run_bench("crash_loop.py", "--iterations", str(ITERATIONS), "--seed", str(SEED), timeout=1800)
    assert result["violations"] == [], json.dumps(result["violations"][:10], indent=2)
    assert result["errors"] == [], json.dumps(result["errors"][:3], indent=2)
    assert result["iterations"] == ITERATIONS
    # The kills really happened: most operations pass the step they were planned to die at.
    assert result["kills"] >= ITERATIONS // 2, result
    assert sum(1 for step in STEPS if result["kills_per_step"][step] > 0) >= 4, result["kills_per_step"]
    # Printed through bench/common.py's main(), like every bench: the commit and the machine it ran on.
    assert result["machine"]["git"]["head"] and len(result["machine"]["load_average"]) == 3, result["machine"]


def test_a_bounded_soak_of_every_surface_at_once_has_no_error_and_no_violation():
    result = run_bench("soak.py", "--seconds", "20", timeout=1800)
    assert result["error_count"] == 0, json.dumps(result["errors"], indent=2)
    assert result["violations"] == [], result["violations"]
    assert result["health"] == "ok"
    assert set(result["surfaces"]) == {"cli", "tcp", "socket", "mcp", "reindex"}
    assert all(surface["calls"] > 0 for surface in result["surfaces"].values()), result["surfaces"]


def test_the_invariant_check_would_catch_a_lost_write(tmp_path):
    """A guard on the guard: a memory file removed behind the controller's back is reported."""
    home = tmp_path / "home"
    workspace = tmp_path / "project"
    (workspace / ".git").mkdir(parents=True)
    env = {"COMPOZY_HOME": str(home), "PATH": "/usr/bin:/bin"}
    worker = REPO / "tests" / "crash" / "writer.py"
    done = subprocess.run([sys.executable, str(worker), "--workspace", str(workspace), "--op", "write", "--seed", "1"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout.splitlines()[-1])
    root = workspace_root(workspace) if (workspace_root(workspace)).is_dir() else home / "memory"
    from tests.crash.invariants import violations

    assert violations(home) == []
    next(p for p in root.glob("*.md") if p.name != "MEMORY.md").unlink()
    found = violations(home)
    assert any("disk and catalog differ" in v for v in found), (written, found)
    assert any("missing though its last decision wrote it" in v for v in found), found
