"""`compozy watch`: the file watcher that `compozy serve` runs beside gunicorn and the task cluster. Hand edits,
new files and deletions under the memory roots become decisions with origin `file` (memory/controller/watch.py)."""

from __future__ import annotations

import signal
from typing import Any

from compozy.command import ProductCommand


class Command(ProductCommand):
    help = "Watch every memory root and record hand edits as decisions (started by `compozy serve`)."
    # Internal: `compozy serve` starts it; `compozy --help` does not list it.
    listed = False

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap
        from memory.services.watch import watch_run

        bootstrap()
        running: list[Any] = []

        def stop(_signum: int, _frame: Any) -> None:
            for watcher in running:
                watcher.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        watch_run(stop_signal=running)
