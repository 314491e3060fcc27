"""A test-only fault hook: COMPOZY_FAULT=<step> makes the writer die with os._exit at that step boundary, so the
crash tests can kill a real writer process exactly there. Unset in normal operation; costs one dict lookup."""

from __future__ import annotations

import os
import sys

STEPS = ("after_decision_commit", "after_temp_write", "after_rename", "after_reindex", "before_applied")
FAULT_EXIT_CODE = 86


def hit(step: str) -> None:
    if os.environ.get("COMPOZY_FAULT") == step:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(FAULT_EXIT_CODE)
