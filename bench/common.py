"""Shared setup for the benchmarks in this directory. They are plain scripts, never tests.

Importing this module touches nothing. `start()` must run before anything imports Django: it points
COMPOZY_HOME at a fresh temp dir, configures Django and bootstraps the database there. `finish()` removes every
temp dir the run created.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import sqlite3
import string
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_temp_dirs: list[Path] = []
_git_at_start: dict[str, object] | None = None


@dataclass(frozen=True)
class Env:
    base: Path  # one temp dir holding everything of this run
    home: Path  # COMPOZY_HOME
    workspace: Path  # a directory with a .git folder: the workspace is auto-created there
    scratch: Path  # for the floors, on the same filesystem as the product's files


def start(prefix: str) -> Env:
    if "django" in sys.modules:
        raise RuntimeError("bench.common.start() must run before Django is imported")
    record_git()
    base = Path(tempfile.mkdtemp(prefix=f"compozy-bench-{prefix}-"))
    _temp_dirs.append(base)
    home = base / "home"
    workspace = base / "project"
    scratch = base / "floor"
    for path in (home, workspace / ".git", scratch):
        path.mkdir(parents=True)
    os.environ["COMPOZY_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    # A leftover crash-test hook would kill the benchmark at its first write.
    os.environ.pop("COMPOZY_FAULT", None)

    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()
    return Env(base=base, home=home, workspace=workspace, scratch=scratch)


def finish() -> None:
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: BLE001 - cleanup must go on
        pass
    for path in _temp_dirs:
        shutil.rmtree(path, ignore_errors=True)
    _temp_dirs.clear()


def machine() -> dict[str, object]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "git": _git_at_start or _git(),
    }


def record_git() -> None:
    """Remember the commit now, when the product code is imported, not when the figures are printed."""
    global _git_at_start
    _git_at_start = _git()


def _git() -> dict[str, object]:
    """The commit measured, and which product files differed from it (benchmarks may run on a dirty tree)."""
    import subprocess

    def out(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = [line[3:] for line in out("status", "--porcelain", "--", "compozy", "memory").splitlines()]
    return {"head": out("rev-parse", "--short", "HEAD"), "modified_product_paths": dirty}


def emit(document: dict[str, object]) -> None:
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()


def log(message: str) -> None:
    """Progress goes to stderr so stdout stays one JSON document."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Content: every word is a random 8-letter lowercase word used by exactly one memory, so no two memories share a
# word and the controller's lexical-overlap and entity rules never see two memories as related.


class Words:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._seen: set[str] = set()

    def word(self) -> str:
        while True:
            word = "".join(self._rng.choices(string.ascii_lowercase, k=8))
            if word not in self._seen:
                self._seen.add(word)
                return word

    def words(self, count: int) -> list[str]:
        return [self.word() for _ in range(count)]


@dataclass(frozen=True)
class Content:
    name: str
    description: str
    body: str


def content(words: Words, *, lines: int = 3, per_line: int = 8) -> Content:
    name = " ".join(words.words(3))
    description = " ".join(words.words(6)).capitalize() + "."
    body = "\n".join(" ".join(words.words(per_line)).capitalize() + "." for _ in range(lines))
    return Content(name=name, description=description, body=body)


class ProseWords:
    """Words with a natural (Zipf) frequency over a fixed synthetic vocabulary: memories share common words the
    way prose does. Used where the controller's overlap rules do not apply (reindex), because random unique words
    are the worst case for the trigram index and no user writes like that."""

    def __init__(self, seed: int, vocabulary: int = 5000) -> None:
        self._rng = random.Random(seed)
        self._vocabulary = ["".join(self._rng.choices(string.ascii_lowercase, k=self._rng.randint(3, 10)))
                            for _ in range(vocabulary)]
        self._weights = [1 / (rank + 1) for rank in range(vocabulary)]
        self._names = Words(seed + 1)

    def words(self, count: int) -> list[str]:
        return self._rng.choices(self._vocabulary, self._weights, k=count)


def prose_content(words: ProseWords, *, lines: int = 3, per_line: int = 8) -> Content:
    # The name stays unique (it becomes the filename); the rest reads like text with shared common words.
    name = " ".join(words._names.words(3))
    description = " ".join(words.words(6)).capitalize() + "."
    body = "\n".join(" ".join(words.words(per_line)).capitalize() + "." for _ in range(lines))
    return Content(name=name, description=description, body=body)


def slug_of(name: str) -> str:
    return name.replace(" ", "_")


# ---------------------------------------------------------------------------------------------------------------
# Statistics


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank on sorted data with linear interpolation (the same as numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(seconds: list[float]) -> dict[str, float]:
    total = sum(seconds)
    return {
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3),
        "writes_per_s": round(len(seconds) / total, 1),
    }


def parse_sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


# ---------------------------------------------------------------------------------------------------------------
# Profiling: `--profile out.prof` wraps the timed section in cProfile; the top functions go to stderr.


class Profiler:
    def __init__(self, path: str | None) -> None:
        self.path = path
        self._profile = None

    def __enter__(self) -> Profiler:
        if self.path:
            import cProfile

            self._profile = cProfile.Profile()
            self._profile.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._profile is None:
            return
        import io
        import pstats

        self._profile.disable()
        self._profile.dump_stats(self.path)
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(self._profile, stream=out).sort_stats(key).print_stats(25)
            log(f"profile ({key}) saved to {self.path}:\n{out.getvalue()}")
        self._profile = None
