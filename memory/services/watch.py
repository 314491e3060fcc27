"""The watch noun: the file watcher `compozy serve` runs (memory/controller/watch.py), configured from
`memory.watch.*` in the home configuration."""

from __future__ import annotations

from compozy.config import get_config
from memory.controller.watch import Watcher


def watch_run(*, stop_signal: list[Watcher] | None = None) -> None:
    """Watch every administered root until stopped. `stop_signal`, when given, receives the watcher so the caller
    (a signal handler) can stop it."""
    settings = get_config(None).memory.watch
    watcher = Watcher(debounce_ms=settings.debounce, max_delay_ms=settings.max_delay, backend=settings.backend,
                      poll_interval_ms=settings.poll_interval)
    if stop_signal is not None:
        stop_signal.append(watcher)
    watcher.run()
