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
from compozy.home import private_dir
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
def drain_lock(timeout_ms: int) -> Iterator[None]:
    """One extractor drain at a time, across processes. Whoever holds it knows that a claimed inbox file is no
    live drain's: the kernel dropped the lock of the drain that claimed it when it died."""
    with _file_lock(time.monotonic() + timeout_ms / 1000, timeout_ms, name="extractor-drain.lock",
                    holder="extractor drain ran"):
        yield


@contextmanager
def sync_lock(timeout_ms: int) -> Iterator[None]:
    """One `memory sync` at a time (the CLI, a session stop's, the schedule's): two would race on one repository."""
    with _file_lock(time.monotonic() + timeout_ms / 1000, timeout_ms, name="sync.lock", holder="memory sync ran"):
        yield


@contextmanager
def _file_lock(deadline: float, timeout_ms: int, *, name: str = "write.lock",
               holder: str = "writer held the memory write lock") -> Iterator[None]:
    run_dir = compozy_home() / "run"
    private_dir(run_dir)
    fd = os.open(run_dir / name, os.O_RDWR | os.O_CREAT, 0o600)
    owned = True
    try:
        if not _acquire(fd, deadline):
            owned = False  # a waiter thread still blocks on the descriptor; it releases and closes it
            raise ControllerTimeout(
                f"Another {holder} for more than {timeout_ms} ms.",
                details={"timeout_ms": timeout_ms},
            )
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        if owned:
            os.close(fd)


def _acquire(fd: int, deadline: float) -> bool:
    """Take the flock by `deadline`. A blocking flock() is woken by the kernel the moment the holder releases it,
    so writers in other processes take turns; polling with sleeps let a process whose threads queue back to back
    keep the lock while the other process slept (hundreds of milliseconds of tail latency under load). flock()
    has no timeout, so a waiter thread blocks and this thread waits for it up to the deadline."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    guard = threading.Lock()
    taken = threading.Event()
    state = {"abandoned": False}

    def wait() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with guard:
            if state["abandoned"]:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                return
            taken.set()

    threading.Thread(target=wait, name="compozy-write-lock-wait", daemon=True).start()
    if taken.wait(max(0.0, deadline - time.monotonic())):
        return True
    with guard:
        if taken.is_set():
            return True  # taken right at the deadline
        state["abandoned"] = True
    return False
