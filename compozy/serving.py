"""Where a running `compozy serve` of this home listens, so that other commands (`compozy inspector link`) print
its real address rather than the configured default."""

from __future__ import annotations

import json
import os
from pathlib import Path

from compozy.config import compozy_home
from compozy.home import write_private


def address_file() -> Path:
    return compozy_home() / "run" / "serve.json"


def record_address(bind: str) -> None:
    write_private(address_file(), json.dumps({"pid": os.getpid(), "bind": bind}))


def forget_address(bind: str) -> None:
    if running_address() == bind:
        address_file().unlink(missing_ok=True)


def running_address() -> str | None:
    """The address a live `compozy serve` of this home listens on, or None when none is running."""
    try:
        record = json.loads(address_file().read_text())
        os.kill(int(record["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(record["bind"])
