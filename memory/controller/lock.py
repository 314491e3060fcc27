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
# Threads of one process (a server's workers) queue here first, so only one of them polls the flock and a writer
# that just released it cannot starve the others.
_process_queue = threading.Lock()


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
    deadline = time.monotonic() + timeout_ms / 1000
    if not _process_queue.acquire(timeout=timeout_ms / 1000):
        raise ControllerTimeout(
            f"Another writer held the memory write lock for more than {timeout_ms} ms.",
            details={"timeout_ms": timeout_ms},
        )
    try:
        with _file_lock(deadline, timeout_ms):
            _held.depth = 1
            try:
                yield
            finally:
                _held.depth = 0
    finally:
        _process_queue.release()


@contextmanager
def _file_lock(deadline: float, timeout_ms: int) -> Iterator[None]:
    run_dir = compozy_home() / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / "write.lock", os.O_RDWR | os.O_CREAT, 0o600)
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
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
