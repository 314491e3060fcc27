"""Test-only fault hooks at step boundaries, unset in normal operation (each costs one dict lookup):

- COMPOZY_FAULT=<step>: the process dies with os._exit at that boundary, so the crash tests can kill a real
  writer exactly there. `<step>@<n>` dies at the n-th time the step is reached, and COMPOZY_FAULT_SIGNAL=KILL
  dies by SIGKILL instead (no exit handlers, no flushing: the harshest death);
- COMPOZY_FAULT_PAUSE=<step>: the process prints `COMPOZY_PAUSED <step>` to stderr and sleeps there, so a test
  can SIGKILL it from outside in the middle of its work;
- COMPOZY_FAULT_RAISE=<step>: an InjectedFault is raised there, for the tests of a failure at each step.
"""

from __future__ import annotations

import os
import signal
import sys
import time

STEPS = ("after_decision_commit", "after_temp_write", "after_rename", "after_reindex", "before_applied")
# The boundaries of a dreaming run (memory.dreaming.run), entered in this order.
DREAM_STEPS = ("dream_candidates", "dream_artifact", "dream_synthesis", "dream_submit", "dream_stamp")
# Pressure compaction: between the durable coverage commit and the archive update (memory/sessions/compaction.py).
SESSION_STEPS = ("after_coverage_commit",)
FAULT_EXIT_CODE = 86
_reached: dict[str, int] = {}


def hit(step: str) -> None:
    if os.environ.get("COMPOZY_FAULT_PAUSE") == step:
        sys.stderr.write(f"COMPOZY_PAUSED {step}\n")
        sys.stderr.flush()
        while True:
            time.sleep(60)
    fault = os.environ.get("COMPOZY_FAULT")
    if not fault:
        return
    name, _, nth = fault.partition("@")
    if name != step:
        return
    _reached[step] = _reached.get(step, 0) + 1
    if nth and _reached[step] != int(nth):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    if os.environ.get("COMPOZY_FAULT_SIGNAL") == "KILL":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(FAULT_EXIT_CODE)


class InjectedFault(RuntimeError):
    """Raised at a step boundary by COMPOZY_FAULT_RAISE."""


def fail(step: str) -> None:
    if os.environ.get("COMPOZY_FAULT_RAISE") == step:
        raise InjectedFault(f"injected failure at {step}")
