"""The base of the product's own commands (`compozy memory`, `serve`, `mcp`, `inspector` …).

Django's management commands add `--settings`, `--pythonpath`, `--traceback`, `--no-color`, `--force-color`,
`--skip-checks`, `--version` and a numeric `-v` to every command. None of them means anything to a user of the
product, so the product's commands build their parser without them (their defaults are still set, because
Django's `run_from_argv` and `execute` read them). Errors of the domain leave with their stable code and exit
code, as `{code, message, details}` on `-o json`; a reader that closes the pipe early (`| head -1`) ends the
command quietly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.domain.errors import CompozyError, ValidationError
from memory.domain.text import UNPRINTABLE, escape_control_characters

OUTPUTS = ("human", "json", "jsonl")
_DJANGO_DEFAULTS = {"verbosity": 1, "settings": None, "pythonpath": None, "traceback": False, "no_color": False,
                    "force_color": False, "skip_checks": True}


class ProductParser(CommandParser):
    """Usage errors become memory.validation, so `-o json` callers get the same error shape as any other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        close = did_you_mean(message)
        hint = f"; did you mean {close!r}?" if close else ""
        raise ValidationError(f"{self.prog}: {message}{hint}", details={"reason": "usage", "did_you_mean": close})

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # A flag generated from a model field keeps its choices for help and completion, but the model is what
        # refuses a value, so the CLI answers with the same code and message as HTTP and MCP.
        if getattr(action, "model_field", False):
            return
        super()._check_value(action, value)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def did_you_mean(message: str, choices: list[str] | None = None) -> str | None:
    """The choice closest to what was typed, for an argparse invalid-choice message (Python 3.11's argparse offers
    none) or, with `choices`, for `message` itself; None when nothing is close."""
    import difflib

    found = _INVALID_CHOICE.search(message)
    if found is None and choices is None:
        return None
    word = found.group(1) if found else message
    options = choices if choices is not None else re.findall(r"'([^']*)'", found.group(2))  # type: ignore[union-attr]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return close[0] if close else None


def output_from_argv(argv: list[str]) -> str:
    for index, arg in enumerate(argv):
        if arg in ("-o", "--output") and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--output="):
            return arg.split("=", 1)[1]
        if arg.startswith("-o") and len(arg) > 2:
            return arg[2:]
    return "human"


def quiet_on_closed_pipe() -> None:
    """The reader went away (`compozy memory list -o jsonl | head -1`): nothing more to say, and Python must not
    complain at exit while flushing stdout into the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


# ----- printing for a terminal: a JSON document, and an error as every product command prints it -----------


def terminal_json(value: Any, *, indent: int | None = None) -> str:
    """JSON for a terminal. json.dumps escapes C0 controls in strings already; DEL, C1 and the invisible and
    bidirectional characters it leaves raw are written as \\u escapes too, which decode to the same document."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return UNPRINTABLE.sub(_json_escape, text)


def _json_escape(match: Any) -> str:
    code = ord(match.group(0))
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a tag character and the like: JSON spells it as a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


# Where a one-word field name in a message is the field itself ("set workspace", "Missing name in the request"),
# not an ordinary word of the sentence ("a workspace"): the words just before it.
_FIELD_CONTEXT = r"\b(set|with|give|needs|Missing|Invalid|as) "


def cli_message(message: str, flags: dict[str, str]) -> str:
    """A message in the CLI's own words: the fields it names become the flags that set them ("Scope agent needs
    --agent", "set --workspace"). The JSON document keeps the field names every surface shares."""
    frontmatter = re.fullmatch(r"Missing (\w+) in the frontmatter\.", message)
    if frontmatter and frontmatter.group(1) in flags:
        field = frontmatter.group(1)
        return f"Missing {flags[field]} (or {field}: in the content's frontmatter)."
    for field, flag in sorted(flags.items(), key=lambda item: -len(item[0])):
        if "_" in field:  # agent_name, create_workspace: identifiers, never ordinary words
            message = re.sub(rf"\b{re.escape(field)}\b", flag, message)
        else:
            message = re.sub(rf"{_FIELD_CONTEXT}{re.escape(field)}\b(?!-)", rf"\1 {flag}", message)
    return message


def emit_error(error: dict[str, Any], output: str, flags: dict[str, str] | None = None) -> None:
    """Messages name fields, as on every surface; the CLI adds the flag that sets the field."""
    if output in ("json", "jsonl"):
        sys.stdout.write(terminal_json(error, indent=2 if output == "json" else None) + "\n")
        return
    details = error.get("details") or {}
    lines = [f"error: {cli_message(error['message'], flags or {})}", f"  code: {error['code']}"]
    rules = details.get("rules")
    if rules:
        lines.append(f"  rules: {', '.join(rules)}")
    decision = details.get("decision")
    if isinstance(decision, dict) and decision.get("id"):
        lines.append(f"  decision: {decision['id']}")
    for key in ("field", "key", "file", "filename", "reason"):
        if key in details and details[key] not in (None, ""):
            flag = (flags or {}).get(str(details[key])) if key == "field" else None
            hint = f" ({flag})" if flag and flag != details[key] else ""
            lines.append(f"  {key}: {details[key]}{hint}")
    sys.stderr.write(escape_control_characters("\n".join(lines)) + "\n")


class ProductCommand(BaseCommand):
    requires_system_checks: list[str] = []
    # Listed by `compozy --help`; an internal command (qcluster, started by serve) is not.
    listed = True

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = ProductParser(
            prog=f"{Path(prog_name).name} {subcommand}",
            description=self.help or None,
            missing_args_message=getattr(self, "missing_args_message", None),
            called_from_command_line=getattr(self, "_called_from_command_line", None),
            **kwargs,
        )
        parser.set_defaults(**_DJANGO_DEFAULTS)
        self.add_arguments(parser)
        return parser

    # Field → CLI flag of the verb being run, so an error about a field can name the flag too.
    error_flags: dict[str, str] = {}

    def run_from_argv(self, argv: list[str]) -> None:
        output = output_from_argv(argv)
        try:
            super().run_from_argv(argv)
        except CompozyError as error:
            emit_error(error.to_dict(), output if output in OUTPUTS else "human", self.error_flags)
            sys.exit(error.exit_code)
        except BrokenPipeError:
            quiet_on_closed_pipe()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            quiet_on_closed_pipe()
