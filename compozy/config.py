"""Configuration: built-in defaults, then $COMPOZY_HOME/config.toml, then <ws>/.compozy/config.toml, then
environment variables (`COMPOZY_MEMORY__FILE__MAX_LINES=100` sets memory.file.max_lines).

The merged result is validated once by one pydantic model. An unknown key or a bad value is reported with the
key and the file (or variable) that set it.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory.domain.errors import ConfigError

ENV_PREFIX = "COMPOZY_"
DEFAULTS = "built-in defaults"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _duration_ms(value: Any) -> int:
    """`300ms`, `2s`, `1.5s`, `10m`, `1h` or a bare number of milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '300ms' or '2s'")
    if isinstance(value, int | float):
        return int(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(value))
    if not match:
        raise ValueError("expected a duration such as '300ms' or '2s'")
    number, unit = float(match.group(1)), match.group(2) or "ms"
    return int(number * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit])


class FileLimits(_Section):
    max_lines: int = Field(200, ge=1, le=100_000)
    max_bytes: int = Field(25_600, ge=64, le=10_000_000)


class SnapshotConfig(_Section):
    """The frozen section a session starts with (memory/sessions/snapshot.py). `budget_tokens` bounds all of it
    (indexes, recall block, checkpoint), tokens estimated as ceil(characters / 4)."""

    budget_tokens: int = Field(2000, ge=250, le=200_000)
    # The share of the budget the indexes keep when the boot request carries a question: the recall block gets
    # the rest of the room it needs.
    index_share_with_query: float = Field(0.0625, ge=0, le=1)


class ControllerConfig(_Section):
    mode: Literal["rules", "hybrid"] = "hybrid"
    max_latency: int = 300
    default_op_on_fail: Literal["noop", "reject"] = "noop"
    # How long a writer waits for the per-database write lock before memory.controller.timeout.
    lock_timeout: int = 30_000

    _ms = field_validator("max_latency", "lock_timeout", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class RecallWeights(_Section):
    """The four lists (word, trigram, semantic, token match) weigh the same before a question: each question scales
    them by how decisive each list is for it (memory.recall.pipeline.list_weights), so no list is favoured for one
    shape of data."""

    unicode: float = Field(0.30, ge=0)
    trigram: float = Field(0.30, ge=0)
    semantic: float = Field(0.30, ge=0)
    token: float = Field(0.30, ge=0)
    recency: float = Field(0.15, ge=0)
    signal: float = Field(0.10, ge=0)


class Freshness(_Section):
    banner_after_days: int = Field(1, ge=0)


class RecallContext(_Section):
    """Session context: a memory recorded just after a match, in the same session, shares part of its score.
    The k-th memory after it gets `decay`^k of it, up to `window` memories; 0 turns this off."""

    window: int = Field(2, ge=0, le=10)
    decay: float = Field(0.5, ge=0, le=1)


class RecallConfig(_Section):
    top_k: int = Field(5, ge=1, le=20)
    max_top_k: int = Field(20, ge=1, le=100)
    raw_candidates: int = Field(50, ge=1, le=1000)
    weights: RecallWeights = RecallWeights()
    freshness: Freshness = Freshness()
    recency_half_life_days: float = Field(14.0, gt=0)
    context: RecallContext = RecallContext()
    # Reciprocal-rank constant: a list's entry at rank r (from 0) scores weight·k/(k+r).
    rank_constant: float = Field(1.0, gt=0)


class DreamGates(_Section):
    min_unpromoted: int = Field(5, ge=1)
    min_recall_count: int = Field(2, ge=1)
    min_score: float = Field(0.75, ge=0, le=1)


class DreamConfig(_Section):
    enabled: bool = True
    # time gate: hours since the workspace's last successful run
    min_hours: float = Field(24, ge=0)
    # sessions gate: completed sessions since then
    min_sessions: int = Field(3, ge=0)
    # of recency (since last recalled) and freshness (since last updated) in the candidate score
    half_life_days: float = Field(14.0, gt=0)
    gates: DreamGates = DreamGates()
    max_candidates: int = Field(20, ge=1, le=200)
    # how often the cluster's schedule checks the gates of each workspace with activity (django-q2's scheduler
    # itself wakes about every 30 s)
    check_every_minutes: int = Field(30, ge=1, le=24 * 60)
    # a runner's lock older than this is stale and is taken over
    lock_stale_after: int = 3_600_000
    # characters of each candidate's body quoted in the synthesis
    snippet_chars: int = Field(200, ge=20, le=2000)

    _ms = field_validator("lock_stale_after", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class WatchConfig(_Section):
    """The file watcher `compozy serve` runs: hand edits under a memory root become decisions."""

    enabled: bool = True
    # auto: watchdog (inotify) when installed, else polling
    backend: Literal["auto", "watchdog", "polling"] = "auto"
    # a file is reconciled once quiet this long (a burst of saves is one decision) ...
    debounce: int = 300
    # ... or this long after its first change, when saves keep coming
    max_delay: int = 1000
    # how often the polling fallback lists the roots
    poll_interval: int = 500

    _ms = field_validator("debounce", "max_delay", "poll_interval", mode="before")(
        classmethod(lambda cls, v: _duration_ms(v)))


class SyncConfig(_Section):
    """`memory sync` of global memory through git (memory/controller/sync.py), once it was synced by hand."""

    # Sync after each session stops (queued on the task cluster).
    after_session_stop: bool = False
    # The task cluster syncs this often; 0 never on a schedule.
    every_minutes: int = Field(0, ge=0, le=10_080)


class DecisionsConfig(_Section):
    prune_after_applied_days: int = Field(90, ge=1)


class WorkspaceConfig(_Section):
    auto_create: bool = True


class ProviderConfig(_Section):
    kind: Literal["local", "openai"] = "local"
    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout: int = 30_000
    # After this many consecutive failed calls the endpoint is left alone for `cooldown`.
    failure_threshold: int = Field(3, ge=1, le=100)
    cooldown: int = 60_000

    _ms = field_validator("timeout", "cooldown", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class ExtractorConfig(_Section):
    """Memories proposed from session transcripts (see memory/services/extractor.py)."""

    enabled: bool = True
    # One run may take this long (provider call included) before it is abandoned as failed.
    deadline: int = 60_000
    # Requests arriving while a session's run is in progress are folded into one follow-up run, up to this many.
    coalesce_max: int = Field(16, ge=1, le=1000)
    # Earlier turns shown with the new ones, only so a bare correction ("no, it's 5433") knows what it corrects.
    context_turns: int = Field(4, ge=0, le=50)
    # New turns sent to the provider in one run; a longer backlog is read in several runs.
    max_turns: int = Field(200, ge=1, le=10_000)

    _ms = field_validator("deadline", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class EmbedderConfig(_Section):
    """Where recall's vectors come from (memory/providers/embeddings.py). Read from the home config and the
    environment only: every vector in the database must come from one model."""

    kind: Literal["local", "openai", "none"] = "local"
    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout: int = 2_000
    batch: int = Field(64, ge=1, le=2048)

    _ms = field_validator("timeout", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class MemoryConfig(_Section):
    file: FileLimits = FileLimits()
    controller: ControllerConfig = ControllerConfig()
    recall: RecallConfig = RecallConfig()
    snapshot: SnapshotConfig = SnapshotConfig()
    dream: DreamConfig = DreamConfig()
    decisions: DecisionsConfig = DecisionsConfig()
    watch: WatchConfig = WatchConfig()
    sync: SyncConfig = SyncConfig()
    workspace: WorkspaceConfig = WorkspaceConfig()
    provider: ProviderConfig = ProviderConfig()
    extractor: ExtractorConfig = ExtractorConfig()
    embedder: EmbedderConfig = EmbedderConfig()


class CompactionConfig(_Section):
    pressure_threshold: float = Field(0.85, gt=0, le=1)
    # After a failed summary, pressure triggers wait this long before asking the provider again.
    cooldown: int = 600_000

    _ms = field_validator("cooldown", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class ProjectionConfig(_Section):
    """The bounded transcript a checkpoint or compaction summary is built from: the newest messages only."""

    max_messages: int = Field(256, ge=1, le=100_000)
    max_bytes: int = Field(192_000, ge=1024, le=100_000_000)


class HooksConfig(_Section):
    """Agent hooks (`compozy hook claude-code …`): each call reads at most this many bytes of the transcript, on from
    where the last call stopped, so a hook's time and memory are bounded whatever the transcript holds."""

    transcript_read_bytes: int = Field(4_194_304, ge=65_536, le=1_073_741_824)


class SessionConfig(_Section):
    compaction: CompactionConfig = CompactionConfig()
    projection: ProjectionConfig = ProjectionConfig()
    hooks: HooksConfig = HooksConfig()
    # A running session with no activity this long is stopped by the task cluster (reason idle); 0 never stops one.
    idle_close_after: int = Field(14_400_000, ge=0)

    _ms = field_validator("idle_close_after", mode="before")(classmethod(lambda cls, v: _duration_ms(v)))


class ServerConfig(_Section):
    bind: str = "127.0.0.1:8000"


class Config(_Section):
    memory: MemoryConfig = MemoryConfig()
    session: SessionConfig = SessionConfig()
    server: ServerConfig = ServerConfig()


# (COMPOZY_HOME, HOME, the home they give): the last answer, reused while both variables hold the same values.
_home: tuple[str | None, str | None, Path] | None = None


def compozy_home() -> Path:
    """$COMPOZY_HOME, or ~/.compozy. Kept for as long as the two variables it depends on are unchanged (a test or
    a process that changes either gets the new home at its next call): the write path asks for it several times
    per candidate (the locks, each root check, the global root), and building the Path was most of the cost."""
    global _home
    configured, user_home = os.environ.get("COMPOZY_HOME"), os.environ.get("HOME")
    cached = _home
    if cached is not None and cached[0] == configured and cached[1] == user_home:
        return cached[2]
    home = Path(configured or Path.home() / ".compozy").expanduser()
    _home = (configured, user_home, home)
    return home


def _flatten(data: dict[str, Any], source: str, prefix: str = "") -> dict[str, str]:
    sources: dict[str, str] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        sources[dotted] = source
        if isinstance(value, dict):
            sources.update(_flatten(value, source, dotted + "."))
    return sources


def _deep_merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid TOML: {exc}", details={"file": str(path), "reason": "toml"}
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not valid UTF-8.", details={"file": str(path), "reason": "encoding"}) from None


def _env_layer(environ: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if not all(parts):
            continue
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = layer
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = value
            sources[".".join(parts)] = f"environment variable {name}"
    return layer, sources


def load_config(*, workspace_root: Path | None = None, environ: dict[str, str] | None = None) -> Config:
    environ = dict(os.environ if environ is None else environ)
    layers: list[tuple[dict[str, Any], dict[str, str]]] = []
    home_file = Path(environ.get("COMPOZY_HOME") or Path.home() / ".compozy").expanduser() / "config.toml"
    files = [home_file]
    if workspace_root is not None:
        files.append(workspace_root / ".compozy" / "config.toml")
    for path in files:
        if path.is_file():
            data = _read_toml(path)
            layers.append((data, _flatten(data, str(path))))
    layers.append(_env_layer(environ))

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for data, layer_sources in layers:
        merged = _deep_merge(merged, data)
        sources.update(layer_sources)
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        source = _source_of(key, sources)
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ConfigError(
            f"Invalid configuration key {key!r} in {source}: {problem}.",
            details={"key": key, "file": source, "problem": problem, "reason": "config"},
        ) from None


def _source_of(key: str, sources: dict[str, str]) -> str:
    parts = key.split(".")
    while parts:
        found = sources.get(".".join(parts))
        if found:
            return found
        parts.pop()
    return DEFAULTS


@lru_cache(maxsize=64)
def _cached(home: str, workspace_root: str | None, stamp: tuple[Any, ...]) -> Config:
    return load_config(workspace_root=Path(workspace_root) if workspace_root else None)


def get_config(workspace_root: Path | None = None) -> Config:
    """The validated config, re-read only when a config file or COMPOZY_ variable changes."""
    home = compozy_home()
    paths = [home / "config.toml"]
    if workspace_root is not None:
        paths.append(workspace_root / ".compozy" / "config.toml")
    # Every search and write asks for the config, so the check is kept cheap: one stat a file, and the values of the
    # COMPOZY_ variables only (reading every variable's value cost more than the rest of this function).
    stamp = tuple(_mtime_ns(p) for p in paths) + tuple(
        sorted((k, os.environ[k]) for k in os.environ if k.startswith(ENV_PREFIX) and "__" in k)
    )
    return _cached(str(home), str(workspace_root) if workspace_root else None, stamp)


def _mtime_ns(path: Path) -> int:
    """The file's mtime, 0 when it is missing or not a regular file."""
    try:
        found = os.stat(path)
    except OSError:
        return 0
    return found.st_mtime_ns if stat.S_ISREG(found.st_mode) else 0
