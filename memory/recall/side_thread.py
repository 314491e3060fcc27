"""One long-lived thread that runs the part of a recall that does not depend on the word index's ranking (the
trigram ranking and the semantic similarities) while the calling thread ranks by the word index.

Why it pays: most of each part's time is spent where Python lets go of the GIL, inside sqlite3_step (FTS5's
ranking and bm25 run there) and inside numpy's matrix-vector product, so on two cores the two parts overlap.

Why one thread, kept: Django's connections are per thread; the side thread opens its own once and keeps it, like
a server thread (CONN_MAX_AGE None), instead of paying a connection and its PRAGMAs per question.

When it is not used (`run` calls the function in the calling thread instead):
- inside a transaction (`in_atomic_block`): a second connection cannot see the caller's uncommitted rows (and
  every pytest-django `db` test runs in one);
- an in-memory database: another connection would not see the same data (or only through SQLite's shared cache);
- while the side thread is busy with another thread's question (a server answering several clients at once):
  the caller does its own part rather than queue behind someone else's;
- when the machine has no core to spare: the 1-minute load average at or above the number of cores (read at most
  once a second). Then the side thread waits for a core, or the GIL's holder is preempted by another process
  while the other thread waits for it, and the question took longer than in one thread (measured in paired
  runs at load 3.4-4.4 on 2 cores: +0.5-1.3 ms wall a question at 10,000 memories);
- `enabled` False; True skips the load check (benchmarks and tests compare both paths).

Consistency is the same as running everything in the calling thread: outside a transaction every statement of a
recall was already its own read transaction, so statements on another connection see the same committed data
any later statement of the caller would.

The side thread's connection is closed and opened again when it may point at another database: when its NAME
differs from the caller's, and when any other thread opened a connection since (`connection_created`: a caller
that reconnected may have a database file replaced under the same name, as tests and benchmarks do).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import connection
from django.db.backends.signals import connection_created

T = TypeVar("T")

enabled: bool | None = None  # None: when usable and a core is free; True: whenever usable; False: never
# How many calls ran in the side thread (tests assert that the concurrent path really ran).
side_runs = 0

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_holder: object | None = None  # the question that holds the side thread now, if any
_side_ident: int | None = None
# Bumped whenever a thread other than the side thread opens a database connection.
_epoch = 0
_opened: tuple[str, int] | None = None  # (database name, epoch) the side thread's connection was opened for


def _on_connection_created(sender: Any, **kwargs: Any) -> None:  # noqa: ANN401
    global _epoch
    if threading.get_ident() != _side_ident:
        _epoch += 1


connection_created.connect(_on_connection_created, dispatch_uid="memory.recall.side_thread")


class _Elsewhere(Exception):
    """The side thread's connection settings name another database than the caller's."""


_load_checked = -1.0
_core_free = False


def core_free() -> bool:
    """Whether the 1-minute load average leaves a core free (re-read at most once a second)."""
    global _load_checked, _core_free
    now = time.monotonic()
    if now - _load_checked >= 1.0:
        try:
            _core_free = os.getloadavg()[0] < (os.cpu_count() or 1)
        except OSError:  # no load average on this system
            _core_free = False
        _load_checked = now
    return _core_free


def usable() -> bool:
    """Whether a call may run in the side thread now (see the module's docstring)."""
    if enabled is False or connection.in_atomic_block or connection.is_in_memory_db():
        return False
    return enabled is True or core_free()


def _in_side_thread(name: str, epoch: int, function: Callable[..., T], args: tuple, kwargs: dict) -> T:
    global _side_ident, _opened, side_runs
    _side_ident = threading.get_ident()
    if _opened != (name, epoch) and connection.connection is not None:
        connection.close()
    _opened = None
    if str(connection.settings_dict["NAME"]) != name:
        raise _Elsewhere
    result = function(*args, **kwargs)
    _opened = (name, epoch)
    side_runs += 1
    return result


def _executor_now() -> ThreadPoolExecutor:
    global _executor, _executor_pid
    # A forked child (a server's worker process) inherits the executor object but not its thread.
    if _executor is None or _executor_pid != os.getpid():
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compozy-recall-side")
        _executor_pid = os.getpid()
    return _executor


def _release(token: object) -> None:
    """The side thread is free again, unless another question took it meanwhile (only its holder frees it)."""
    global _holder
    with _lock:
        if _holder is token:
            _holder = None


def busy() -> bool:
    """Whether a question holds the side thread now."""
    return _holder is not None


class Pending:
    """A call started in the side thread, or run in the calling thread when that was not possible."""

    def __init__(self, function: Callable[..., T], args: tuple, kwargs: dict) -> None:
        global _holder
        self._call = (function, args, kwargs)
        self._token = object()
        self._future: Future | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = False
        if usable():
            with _lock:
                if _executor_pid != os.getpid():
                    _holder = None  # a forked child: the question the parent's thread ran is not this process's
                start = _holder is None
                if start:
                    _holder = self._token
            if start:
                try:
                    self._future = _executor_now().submit(_in_side_thread, str(connection.settings_dict["NAME"]),
                                                          _epoch, function, args, kwargs)
                except BaseException:
                    _release(self._token)
                    raise
                # Also freed when the call ends, not only when its value is collected: a caller that raises
                # between start and result() must not leave the side thread held for the rest of the process.
                self._future.add_done_callback(lambda _future, token=self._token: _release(token))

    @property
    def concurrent(self) -> bool:
        return self._future is not None

    def result(self) -> Any:  # noqa: ANN401
        """The call's value (or its exception, raised here), run in this thread if it was not started."""
        if not self._done:
            self._done = True
            if self._future is not None:
                try:
                    self._value = self._future.result()
                except _Elsewhere:
                    self._future = None
                except BaseException as exc:  # noqa: BLE001 (handed to the caller as the call's own error)
                    self._error = exc
                finally:
                    # The done callback may not have run yet when result() returns: free it here too, so this
                    # thread's next question finds the side thread free.
                    _release(self._token)
            if self._future is None:
                function, args, kwargs = self._call
                try:
                    self._value = function(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 (raised below, as if called here)
                    self._error = exc
        if self._error is not None:
            raise self._error
        return self._value


def start(function: Callable[..., T], *args: Any, **kwargs: Any) -> Pending:  # noqa: ANN401
    """`function(*args, **kwargs)` begun in the side thread when usable; `.result()` gives its value either way."""
    return Pending(function, args, kwargs)


def shut_down() -> None:
    """Stop the side thread (its connection is closed first). Tests, and a process that wants no thread left."""
    global _executor, _opened

    def close() -> None:
        connection.close()

    with _lock:
        executor, _executor = _executor, None
    if executor is not None and _executor_pid == os.getpid():
        executor.submit(close).result()
        executor.shutdown(wait=True)
    _opened = None
