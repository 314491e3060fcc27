"""Writes are serialized per database: one writer at a time decides and mutates, across processes and threads.

An flock on a file beside the database does it. The kernel drops the lock when a holder dies, so a crashed
writer never wedges the next one.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from compozy.config import compozy_home
from memory.domain.errors import ControllerTimeout

_held = threading.local()


@contextmanager
def write_lock(timeout_ms: int) -> Iterator[None]:
    if getattr(_held, "depth", 0):
        # Re-entrant within one thread: replay inside a write, or a reconcile inside a reindex.
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    run_dir = compozy_home() / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / "write.lock", os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.001
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ControllerTimeout(
                        f"Another writer held the memory write lock for more than {timeout_ms} ms.",
                        details={"timeout_ms": timeout_ms},
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
