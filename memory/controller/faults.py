"""A test-only fault hook: COMPOZY_FAULT=<step> makes the writer die with os._exit at that step boundary, so the
crash tests can kill a real writer process exactly there. `<step>@<n>` dies at the n-th time the step is reached,
and COMPOZY_FAULT_SIGNAL=KILL dies by SIGKILL instead (no exit handlers, no flushing: the harshest death).
Unset in normal operation; costs one dict lookup."""

from __future__ import annotations

import os
import signal
import sys

STEPS = ("after_decision_commit", "after_temp_write", "after_rename", "after_reindex", "before_applied")
FAULT_EXIT_CODE = 86
_reached: dict[str, int] = {}


def hit(step: str) -> None:
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
