"""A verb's result on the terminal: its human view (declared beside the verb, `memory/verbs/human.py`), one JSON
document, or JSON lines. Errors are printed by the command every product command is built on
(`compozy/command.py: emit_error`)."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from compozy.command import terminal_json
from memory.domain.text import escape_control_characters


def emit(document: dict[str, Any], output: str, human: Callable[..., str], *,
         items_key: str | None = None, out: TextIO | None = None, verbose: int = 0) -> None:
    """`human` may take `verbose` (how many -v were given) to say more."""
    out = out or sys.stdout
    if output == "json":
        out.write(terminal_json(document, indent=2) + "\n")
    elif output == "jsonl":
        if items_key is not None:
            for item in document[items_key]:
                out.write(terminal_json(item) + "\n")
        else:
            out.write(terminal_json(document) + "\n")
    else:
        # Human views print memory text (names, bodies, reasons); a file placed by hand may carry ESC, NUL or a
        # bidi override that the scanner would have refused, so every human view is made visible here, once.
        text = human(document, verbose=verbose) if "verbose" in inspect.signature(human).parameters else human(document)
        text = escape_control_characters(text)
        out.write(text + ("" if text.endswith("\n") else "\n"))


def human_json(document: dict[str, Any]) -> str:
    """For a verb without a human view of its own."""
    return json.dumps(document, ensure_ascii=False, indent=2)
