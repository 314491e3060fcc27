"""Shared setup for the benchmarks in this directory. They are plain scripts, never tests.

Each bench's `main()` is `common.main(parser, measure, home=...)`: flags, start, measure, clean up, one JSON
document with the machine block on stdout. Importing this module touches nothing. `start()` must run before anything
imports Django: it points COMPOZY_HOME at a fresh temp dir, configures Django and bootstraps the database there.
`finish()` removes every temp dir the run created.
"""

from __future__ import annotations

import argparse
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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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


def attach(home: Path) -> None:
    """For a child process that measures a home another process of this run already built: point Django at it
    and start the way a CLI process does (bootstrap: schema check, replay), without creating anything."""
    if "django" in sys.modules:
        raise RuntimeError("bench.common.attach() must run before Django is imported")
    record_git()
    os.environ["COMPOZY_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    os.environ.pop("COMPOZY_FAULT", None)

    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is in KB on Linux)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def worker_process(name: str, measure: Callable[[Env], dict[str, object]], *, keep_home: bool = False) -> None:
    """The body of a per-size worker process: a fresh home, the measurement, its JSON printed. Its temp dirs are
    removed, unless `keep_home`: then the document's `_run` names them for the coordinator's `after` step, which
    removes them (they are removed here only if the measurement fails)."""
    env = start(name)
    try:
        result = measure(env)
    except BaseException:
        finish()
        raise
    if keep_home:
        from django.db import connections

        connections.close_all()
        result["_run"] = {"base": str(env.base), "home": str(env.home), "workspace": str(env.workspace)}
    else:
        finish()
    emit(result)


def size_runner_parser(doc: str, *, sizes: str, seed: int, profile: str,
                       sizes_help: str = "comma-separated N (memories in the workspace)",
                       size_aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The arguments every per-size benchmark takes: --sizes, --seed, --profile and the hidden --worker N that
    runs one size; the benchmark adds its own."""
    arguments = parser(doc)
    arguments.add_argument("--sizes", *size_aliases, default=sizes, help=sizes_help)
    arguments.add_argument("--seed", type=int, default=seed)
    arguments.add_argument("--profile", metavar="PATH", help=profile)
    arguments.add_argument("--worker", type=int, metavar="N", help=argparse.SUPPRESS)
    return arguments


def p50_p95(block: dict[str, object], labels: dict[str, str]) -> dict[str, object]:
    """`<label>_p50_ms` and `<label>_p95_ms` of each timing summary `block[name]`, for a benchmark's summary."""
    return {f"{label}_{q}_ms": block[name][f"{q}_ms"] for name, label in labels.items()  # type: ignore[index]
            for q in ("p50", "p95")}


def run_size_workers(script: str, sizes: list[int], worker_args: list[str], profile: str | None, *,
                     after: Callable[[int, dict[str, object]], None] | None = None) -> dict[str, object]:
    """One worker process per size (`script --worker N ...`), one after the other so that two sizes never share the
    cores; their JSON documents by size. A profile goes to `profile.N`. `after(size, document)` runs once each
    worker has exited (with `keep_home`, it gets the worker's home and removes it)."""
    record_git()
    results: dict[str, object] = {}
    for size in sizes:
        command = [sys.executable, script, "--worker", str(size), *worker_args]
        if profile:
            command += ["--profile", f"{profile}.{size}"]
        log(f"N={size}: starting worker")
        results[str(size)] = run_child(command)
        if after is not None:
            after(size, results[str(size)])
    return results


@dataclass
class Prefill:
    """A worker's prefilled home: the caller and its resolved workspace (created), the workspace root, the prose
    words and random stream the files were written with, and what writing and reindexing them took."""

    caller: object  # memory.services.inputs.Caller
    resolved: object  # memory.services.resolution.Resolved
    ref: object  # memory.domain.models.ScopeRef of the workspace root
    root: Path
    words: ProseWords
    rng: random.Random
    write_s: float = 0.0
    reindex_s: float = 0.0
    files: int = 0  # as the reindex counted them
    catalog_rows: int = 0  # curated rows in the catalog after the reindex
    total_bytes: int = 0  # of the files `write` returned

    @property
    def workspace_id(self) -> str:
        return self.resolved.workspace_id  # type: ignore[attr-defined]


def prefill(env: Env, size: int, seed: int, write: Callable[[Prefill], list[Path]] | None = None) -> Prefill:
    """The untimed start of every per-size worker: the workspace, `write(prefill)` putting the files in place
    (by default `size` prose memories in the workspace root; it returns the paths written), then one
    `catalog_reindex`. Needs Django (call in a worker, after `start()`)."""
    from memory.domain.enums import Origin, Scope
    from memory.domain.models import ScopeRef
    from memory.models import CatalogEntry
    from memory.services.catalog import ReindexInput, catalog_reindex
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    caller = Caller(origin=Origin.CLI, cwd=env.workspace)
    resolved = resolve(Selector(), caller, create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    result = Prefill(caller=caller, resolved=resolved, ref=ref, root=resolved.root(ref), words=ProseWords(seed),
                     rng=random.Random(seed + 2))
    log(f"N={size}: writing the memory files under {env.base}")
    started = time.perf_counter()
    paths = (write or (lambda p: write_prose_memories(p.root, size, p.words, p.rng)))(result)
    result.write_s = time.perf_counter() - started
    result.total_bytes = sum(path.stat().st_size for path in paths)
    started = time.perf_counter()
    result.files = catalog_reindex(data=ReindexInput.parse({}), caller=caller).files
    result.reindex_s = time.perf_counter() - started
    result.catalog_rows = CatalogEntry.objects.filter(is_system=False).count()
    log(f"N={size}: prefill {result.write_s:.1f} s + reindex {result.reindex_s:.1f} s, "
        f"{result.catalog_rows} catalog rows")
    return result


def run_child(command: list[str]) -> dict[str, object]:
    """Run a child whose stdout is one JSON document (stderr passes through) and return that document."""
    import subprocess

    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"child {command[1:]} failed with exit code {completed.returncode}")
    return json.loads(completed.stdout)


def finish() -> None:
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: BLE001 - cleanup must go on
        pass
    for path in _temp_dirs:
        shutil.rmtree(path, ignore_errors=True)
    _temp_dirs.clear()


def in_own_temp_dir(prefix: str, keep: bool, run: Callable[[Path], dict[str, object]]) -> dict[str, object]:
    """For a bench that builds its own home (no `home` for `main`): `run(base)` in a fresh temp dir, removed
    afterwards whatever happens unless `keep`, for inspection: then the document names it under "kept"."""
    base = Path(tempfile.mkdtemp(prefix=f"compozy-{prefix}-"))
    try:
        result = run(base)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    if keep:
        result["kept"] = str(base)
    return result


def parser(doc: str) -> argparse.ArgumentParser:
    """A bench's argument parser: its module docstring as the help text, kept as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def main(arguments: argparse.ArgumentParser, measure: Callable[[Env | None, argparse.Namespace], dict[str, object]],
         *, home: str | None = None, worker: Callable[[argparse.Namespace], None] | None = None,
         is_worker: Callable[[argparse.Namespace], bool] | None = None,
         exit_code: Callable[[dict[str, object]], int] | None = None) -> None:
    """Every bench's `main()`: parse its flags; a hidden child run (`is_worker(args)`, by default: the hidden
    `--worker` flag is set) goes to `worker`, which prints its own answer; otherwise start (a fresh home and
    workspace named after `home`, or with no `home` only the commit measured, for benches that build their own),
    `measure(env, args)`, remove the temp dirs whatever happens, and print the document with the machine block (the
    bench may have put one in itself). `exit_code` turns the document into the process's exit status (a run that
    found errors fails)."""
    args = arguments.parse_args()
    if worker is not None and (is_worker(args) if is_worker else args.worker not in (None, False)):
        worker(args)
        return
    if home is None:
        record_git()
        document = measure(None, args)
    else:
        env = start(home)
        try:
            document = measure(env, args)
        finally:
            finish()
    document.setdefault("machine", machine())
    emit(document)
    if exit_code is not None:
        sys.exit(exit_code(document))


def machine() -> dict[str, object]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "git": _git_at_start or _git(),
        # Indexing and search cost depend on it: compare runs with COMPOZY_MEMORY__EMBEDDER__KIND=none and without.
        "embedder": os.environ.get("COMPOZY_MEMORY__EMBEDDER__KIND", "local"),
        "load_average": [round(value, 2) for value in os.getloadavg()],
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
            # Only trailing newlines go: porcelain status lines start with a meaningful space.
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = [line[3:] for line in out("status", "--porcelain", "--", "compozy", "memory", "inspector").splitlines()]
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

    def zipf_word(self, rng: random.Random) -> str:
        """One word at its natural frequency, drawn from `rng` (not this instance's own stream)."""
        return rng.choices(self._vocabulary, self._weights, k=1)[0]

    def any_word(self, rng: random.Random) -> str:
        """One word drawn uniformly over the vocabulary: most are in the long, rare tail."""
        return rng.choice(self._vocabulary)


def prose_content(words: ProseWords, *, lines: int = 3, per_line: int = 8) -> Content:
    # The name stays unique (it becomes the filename); the rest reads like text with shared common words.
    name = " ".join(words._names.words(3))
    description = " ".join(words.words(6)).capitalize() + "."
    body = "\n".join(" ".join(words.words(per_line)).capitalize() + "." for _ in range(lines))
    return Content(name=name, description=description, body=body)


def slug_of(name: str) -> str:
    return name.replace(" ", "_")


def write_prose_memories(root: Path, count: int, words: ProseWords, rng: random.Random, *,
                         memory_type: str = "project", scope: str = "workspace", days: float = 60.0,
                         now: datetime | None = None, session_size: int = 8,
                         body_bytes: tuple[int, int] | None = None) -> list[Path]:
    """Write `count` valid memory files straight into `root` (no controller): prose text (three short lines, or
    with `body_bytes` (low, high) a body of a size drawn uniformly between them, in lines of twelve words: long
    technical memories), and provenance
    created_at/updated_at spread over the last `days` days and a source session shared by each run of
    `session_size` files (memories are mostly written by agents in sessions, and recall follows a session's
    memories). Needs Django (call after `start()` or `attach()`)."""
    from memory.domain.document import render_document
    from memory.domain.enums import MemoryType, Scope
    from memory.domain.models import Frontmatter, Provenance

    now = now or datetime.now(UTC)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        # About 80 bytes a line of twelve words (the vocabulary's words average 6.5 letters and a space).
        item = prose_content(words) if body_bytes is None else prose_content(
            words, lines=max(1, round(rng.uniform(*body_bytes) / 80)), per_line=12)
        created = now - timedelta(seconds=rng.uniform(0, days * 86_400))
        updated = created + (now - created) * rng.random()
        front = Frontmatter(name=item.name, description=item.description, type=MemoryType(memory_type),
                            scope=Scope(scope),
                            provenance=Provenance(source_sessions=[f"bench-{index // session_size}"],
                                                  created_at=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                                  updated_at=updated.strftime("%Y-%m-%dT%H:%M:%SZ")))
        path = root / f"{memory_type}_{slug_of(item.name)}.md"
        path.write_text(render_document(front, item.body), "utf-8")
        paths.append(path)
    return paths


# Long technical memories, as coding agents write them: bodies of 2-5 KB, several passages each.
LONG_BODY_BYTES = (2000, 5000)


QUESTION_WORDS = ("what", "where", "how")


@dataclass(frozen=True)
class Query:
    text: str
    typo: bool


def prose_queries(words: ProseWords, count: int, seed: int, *, typo_fraction: float = 0.1) -> list[Query]:
    """Deterministic natural-language questions over the vocabulary of `words`: 4-8 content words each, about half
    drawn at their natural frequency (common) and half uniformly (mostly rare), framed by question words. A
    `typo_fraction` of them get one letter changed in a word of 5+ letters (a word the index has likely never
    seen, so recall takes its trigram 4-gram path)."""
    rng = random.Random(seed)
    typos = set(rng.sample(range(count), round(count * typo_fraction)))
    queries = []
    for index in range(count):
        picked = [words.zipf_word(rng) if rng.random() < 0.5 else words.any_word(rng)
                  for _ in range(rng.randint(4, 8))]
        if index in typos:
            long_positions = [i for i, word in enumerate(picked) if len(word) >= 5]
            if not long_positions:
                while len(picked[0]) < 5:
                    picked[0] = words.any_word(rng)
                long_positions = [0]
            position = rng.choice(long_positions)
            word = picked[position]
            at = rng.randrange(len(word))
            letter = rng.choice([c for c in string.ascii_lowercase if c != word[at]])
            picked[position] = word[:at] + letter + word[at + 1:]
        split = rng.randint(1, len(picked) - 1)
        first = rng.choice(QUESTION_WORDS)
        if rng.random() < 0.5:
            text = f"{first} {' '.join(picked[:split])} {rng.choice(QUESTION_WORDS)} {' '.join(picked[split:])}?"
        else:
            text = f"{first} {' '.join(picked)}?"
        queries.append(Query(text=text, typo=index in typos))
    return queries


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


def latency_summary(seconds: list[float], *, counting: str) -> dict[str, float]:
    """p50, p95 and max of a list of durations, and their rate named for what they count (`writes`, `searches`,
    `turns`: `<counting>_per_s`)."""
    total = sum(seconds)
    return {
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3),
        f"{counting}_per_s": round(len(seconds) / total, 1),
    }


def timing_summary(seconds: list[float]) -> dict[str, float]:
    """Count, p50, p95, max and mean of a list of durations, in milliseconds."""
    if not seconds:
        return {"n": 0}
    return {
        "n": len(seconds),
        "p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3),
        "mean_ms": round(sum(seconds) / len(seconds) * 1000, 3),
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
        self._profile.disable()
        dump_profile(self._profile, self.path, "the timed section")
        self._profile = None


def dump_profile(profiler, path: str, what: str) -> None:  # noqa: ANN001 - a cProfile.Profile
    """Save a profile to `path` and log its top functions by cumulative and by own time."""
    import io
    import pstats

    profiler.dump_stats(path)
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(30)
        log(f"profile of {what} ({key}), saved to {path}:\n{out.getvalue()}")


# ---------------------------------------------------------------------------------------------------------------
# The floors' bare durable write: what the product's atomic write does, with nothing around it.


def floor_atomic_write(directory: Path, filename: str, data: bytes) -> None:
    """Temp file, fsync, rename over the target, fsync of the directory."""
    temp = directory / f".{filename}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, directory / filename)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
