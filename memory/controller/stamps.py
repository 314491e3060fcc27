"""A memory root's freshness stamp: its directory's mtime as recorded when the root was last known to be in step
with its catalog (`memory_state`, key `root_mtime:<hash of the root key>`). memory/controller/freshness.py compares
it with the directory before a call reads the catalog; the controller moves it along with its own writes, so that
only what arrived from outside (a pull, a checkout) makes the next call list the root."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import connection

from memory.catalog.state import root_state_key, set_state_value, state_value

from .best_effort import best_effort_write


def stamp_key(root_key: str) -> str:
    return root_state_key("root_mtime", root_key)


def root_mtime(root: Path) -> int | None:
    try:
        return os.stat(root).st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return None


def recorded(root_key: str) -> int | None:
    return state_value(stamp_key(root_key))


def record(root_key: str, mtime_ns: int) -> None:
    best_effort_write(lambda: set_state_value(stamp_key(root_key), mtime_ns), what="the root's freshness stamp")


def advance(root_key: str, before: int | None, after: int | None) -> None:
    """After the controller's own write in the caller's transaction: the stamp moves from the mtime the directory
    had before the write to the one it has now, only if it held `before` (the root was in step then). A root that
    had already changed from outside keeps its old stamp, so the next call still lists and reconciles it."""
    if before is None or after is None or before == after:
        return
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_state SET value = %s WHERE key = %s AND value = %s",
                       [after, stamp_key(root_key), before])
