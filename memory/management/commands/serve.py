"""`compozy serve`: the service on one command. gunicorn serves the web app and API on a loopback TCP port and on
the Unix socket $COMPOZY_HOME/run/compozy.sock (mode 0600); the django-q2 cluster (with its schedules: dreaming,
decision retention) and the file watcher run beside it."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from compozy.command import ProductCommand
from compozy.config import compozy_home, get_config
from compozy.home import private_dir
from compozy.serving import forget_address, record_address


class Command(ProductCommand):
    help = ("Serve the web inspector and API (TCP and Unix socket), run the background task cluster and watch the "
            "memory roots for hand edits.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", help="HOST:PORT for TCP, loopback only (default from config: server.bind, "
                                           "127.0.0.1:8000)")
        parser.add_argument("--no-cluster", action="store_true", help="Do not start the django-q2 task cluster.")
        parser.add_argument("--no-watch", action="store_true",
                            help="Do not start the file watcher (hand edits are then recorded by reindex).")

    def _say(self, text: str) -> None:
        self.stdout.write(text, ending="")
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap()
        from compozy.home import read_or_create_token, token_path

        read_or_create_token()
        bind = options.get("bind") or get_config(None).server.bind
        host = bind.rsplit(":", 1)[0].strip("[]")
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise CommandError(f"Refusing to bind {bind}: Compozy serves loopback only.")
        run_dir = compozy_home() / "run"
        private_dir(run_dir)
        socket_path = run_dir / "compozy.sock"
        if socket_path.exists():
            socket_path.unlink()
        python = sys.executable
        children = [
            subprocess.Popen([python, "-m", "gunicorn", "compozy.wsgi:application", "--config",
                              "python:compozy.gunicorn_conf", "--bind", bind, "--bind", f"unix:{socket_path}"]),
        ]
        if not options["no_cluster"]:
            children.append(subprocess.Popen([python, "-m", "compozy.cli", "qcluster"]))
        if not options["no_watch"] and get_config(None).memory.watch.enabled:
            children.append(subprocess.Popen([python, "-m", "compozy.cli", "watch"]))
        # Stale vectors are embedded again and recall's derived tables built while the service starts, not at the
        # first question (the workers read the tables from the home's cache once this is done).
        threading.Thread(target=_prepare_recall, args=(self._say,), name="recall-prepare", daemon=True).start()
        # `compozy inspector link` prints this address rather than the configured default.
        record_address(bind)
        from inspector.signin import create_link

        self.stdout.write(f"Compozy is serving on http://{bind}/ and unix:{socket_path}\n"
                          f"API requests over TCP need: Authorization: Bearer $(cat {token_path()})\n"
                          f"Sign in to the inspector (one-time link, valid 24 h): {create_link(f'http://{bind}')}\n"
                          f"  (a new link any time: compozy inspector link)\n")
        self.stdout.flush()

        def stop(signum: int, _frame: Any) -> None:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        finally:
            stop(signal.SIGTERM, None)
            forget_address(bind)
            deadline = time.monotonic() + 15
            for child in children:
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
        codes = [child.returncode for child in children]
        if any(code not in (0, -signal.SIGTERM, None) for code in codes):
            raise CommandError(f"a child process exited with {codes}")


def _prepare_recall(say: Callable[[str], None]) -> None:
    from django.db import connection

    from memory.services.catalog import catalog_refresh_vectors
    from memory.services.recall import recall_prepare

    log = logging.getLogger(__name__)
    try:
        try:
            started = time.monotonic()
            filled = catalog_refresh_vectors()
            if filled:
                # Said where the person who started the service reads (an upgrade that changed how vectors are made
                # re-embeds every memory once; until then recall missed the older ones).
                say(f"Embedded {filled} chunk(s) again (made by another model, or stored without a vector) "
                    f"in {time.monotonic() - started:.1f} s\n")
        except Exception:  # noqa: BLE001 (health still reports them, and a reindex fills them)
            log.exception("stale vectors were not refreshed at start-up")
        try:
            recall_prepare()
        except Exception:  # noqa: BLE001 (the first question builds it then, and says why if it cannot)
            log.exception("recall's neighbour table was not built at start-up")
    finally:
        connection.close()
