"""Process start for anything that can write (CLI, server, task cluster): migrate a fresh COMPOZY_HOME without
the user ever running `migrate`, replay decisions a crashed writer left unapplied, then finish or fail dreaming
runs whose process died mid-run."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path

from django.apps import apps
from django.core.management import call_command
from django.db import DatabaseError

from compozy.config import compozy_home
from compozy.home import private_dir
from memory.catalog.state import set_state_value, state_value
from memory.domain.errors import ControllerTimeout

log = logging.getLogger("compozy.bootstrap")
_done = False
SCHEMA_KEY = "schema_stamp"


def _schema_stamp() -> int:
    """A fingerprint of every migration file the installed apps ship; changes when an upgrade adds one."""
    names = []
    for config in apps.get_app_configs():
        migrations = Path(config.path) / "migrations"
        if migrations.is_dir():
            names.extend(f"{config.label}.{p.stem}" for p in migrations.glob("[0-9]*.py"))
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).digest()
    return int.from_bytes(digest[:7], "big")


def _stored_stamp() -> int | None:
    try:
        return state_value(SCHEMA_KEY)
    except DatabaseError:
        return None


def ensure_migrated() -> None:
    stamp = _schema_stamp()
    if _stored_stamp() == stamp:
        return
    run_dir = compozy_home() / "run"
    private_dir(run_dir)
    fd = os.open(run_dir / "migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        # Several first processes may start at once on a fresh home; one migrates, the others wait.
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _stored_stamp() != stamp:
            call_command("migrate", interactive=False, verbosity=0)
            set_state_value(SCHEMA_KEY, stamp)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def bootstrap(*, replay: bool = True) -> None:
    global _done
    if _done:
        return
    ensure_migrated()
    if replay:
        from memory.controller.replay import replay_pending
        from memory.dreaming.recovery import recover_interrupted_runs

        try:
            replay_pending()
            # After replay: a dreaming run killed after its decision was logged finds that decision applied.
            recover_interrupted_runs()
        except (ControllerTimeout, DatabaseError, OSError) as exc:
            # Start-up replay is a courtesy: a database held by another process's write, or a full or read-only
            # home, must not stop a read (or the server) from starting. Nothing is lost: every write replays under
            # the write lock before it decides (controller.core.exclusive), and reports the error there.
            log.warning("start-up replay skipped: %s", exc)
    _done = True
