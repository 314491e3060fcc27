"""The environment a test's child process starts from (no Django here: the conftest imports it first)."""

from __future__ import annotations

import os


def child_environment() -> dict[str, str]:
    """This process's environment without its COMPOZY_ settings, for a child that starts from its own home and
    configuration; the shared cache of tables derived from the model (COMPOZY_CACHE_DIR) stays, or each child
    would build recall's neighbour table again."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith("COMPOZY_") or key == "COMPOZY_CACHE_DIR"}
