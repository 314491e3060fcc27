"""One declaration per verb, from which every surface is generated.

A verb names its input model (a `memory.services.inputs.Input`: fields with descriptions and enums, unknown
fields refused), its service (`service(*, data, caller) -> Result`) and its human renderer. The CLI's flags
(`memory.cli.flags`), the MCP tool's input and output schemas (`memory.tools`) and the REST routes with their
OpenAPI operations (`memory.api`) are all built from that one declaration, so every surface offers the same
names, choices, help text and refusals. The verbs of each noun live in a module of this package listed in
`NOUNS`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, get_type_hints

from django.db import OperationalError

from memory.domain.errors import (
    CompozyError,
    ScopeInvalid,
    ValidationError,
    WorkspaceCopied,
    WorkspaceRequired,
    environment_error,
)

AGENT_TOOLSET = "compozy__memory"
ADMIN_TOOLSET = "compozy__memory_admin"

# Every verb can fail these: its input is validated, and its selectors resolve a scope and a workspace.
COMMON_ERRORS: tuple[type[CompozyError], ...] = (ValidationError, ScopeInvalid, WorkspaceRequired, WorkspaceCopied)


@dataclass(frozen=True)
class Tool:
    """The verb as an MCP tool. Names follow one pattern: `compozy__memory_<verb>` (admin verbs of a group:
    `compozy__memory_<group>_<verb>`). The hints tell an agent's client what the tool may change."""

    name: str
    toolset: str
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


@dataclass(frozen=True)
class Route:
    """The verb over HTTP and the Unix socket. `{name}` segments are taken from the path; GET and DELETE read the
    other fields from the query string, POST and PATCH from a JSON object body."""

    method: str
    path: str

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(re.findall(r"{(\w+)}", self.path))

    @property
    def has_body(self) -> bool:
        return self.method in ("POST", "PATCH")


@dataclass(frozen=True)
class Switch:
    """A CLI flag that runs another verb with the same flags (`snapshot --show-log` runs the snapshot log)."""

    field: str
    help: str
    verb: Verb


# The exit code of a CLI verb that ran but did less than asked (see Verb.incomplete), beside the errors' codes.
INCOMPLETE_EXIT = 9


@dataclass(frozen=True)
class Verb:
    input: type[Any]
    service: Callable[..., Any]
    summary: str
    human: Callable[..., str] | None = None
    # The CLI words that run it, after `compozy`: ("memory", "list"), ("memory", "decisions", "list"). Empty for a
    # verb that has no CLI form (the spec gives `note` none).
    command: tuple[str, ...] = ()
    positionals: tuple[str, ...] = ()
    # With `-o jsonl`, one line per item of this list.
    items_key: str | None = None
    tool: Tool | None = None
    routes: tuple[Route, ...] = ()
    # The errors it can return beyond COMMON_ERRORS (documented per operation in OpenAPI).
    errors: tuple[type[CompozyError], ...] = ()
    # CLI only: how a flag's text becomes the field's value (`--content @file`), extra service keywords (a
    # progress bar), fields not offered as flags, and a switch to a sibling verb.
    readers: Mapping[str, Callable[[str], Any]] = field(default_factory=dict)
    cli_kwargs: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    cli_exclude: frozenset[str] = frozenset()
    switch: Switch | None = None
    # CLI only: whether a result did less than asked (a session replay some of whose dead letters failed). The
    # document is printed as usual, then the command exits INCOMPLETE_EXIT so a script can tell.
    incomplete: Callable[[dict[str, Any]], bool] | None = None

    @cached_property
    def result(self) -> type[Any]:
        """The result model: the service's return annotation."""
        return get_type_hints(self.service)["return"]

    @property
    def all_errors(self) -> tuple[type[CompozyError], ...]:
        return tuple(dict.fromkeys((*COMMON_ERRORS, *self.errors)))

    def run(self, fields: Mapping[str, Any], caller: Any, **kwargs: Any) -> Any:
        """Parse the fields into the input model (unknown fields refused) and call the service once. Failures of the
        environment (a database held by another process's write, a full or read-only filesystem) become their
        stable codes here, once for every surface, instead of tracebacks and 500s."""
        data = self.input.parse(dict(fields))
        try:
            return self.service(data=data, caller=caller, **kwargs)
        except (OperationalError, OSError) as exc:
            translated = environment_error(exc)
            if translated is None:
                raise
            raise translated from exc


# The modules declaring verbs, one per noun. A new noun adds its module here.
NOUNS = ("memory.verbs.memory", "memory.verbs.dream", "memory.verbs.extractor", "memory.verbs.sessions",
         "memory.verbs.imports", "memory.verbs.hooks", "memory.verbs.workspace")

# Help for the CLI's intermediate words (`compozy memory decisions …`).
GROUPS: dict[tuple[str, ...], str] = {}


def all_verbs() -> list[Verb]:
    verbs: list[Verb] = []
    for module in NOUNS:
        loaded = importlib.import_module(module)
        verbs.extend(loaded.VERBS)
        GROUPS.update(getattr(loaded, "GROUPS", {}))
    return verbs


def verbs_of(noun: str) -> list[Verb]:
    return [verb for verb in all_verbs() if verb.command[:1] == (noun,)]
