"""Load a benchmark script (bench/<name>.py) as a module, for tests of its pure parts. The scripts import their
sibling `common` by name, so bench/ is on sys.path while the script loads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench_script(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
