"""`compozy hook claude-code <event>`: the Claude Code hooks adapter (memory/services/hooks.py).

A hook runs inside the user's agent and must never block or break it. Whatever happens the command exits 0; on
success it prints only what the hook protocol expects (SessionStart's hookSpecificOutput JSON), on failure
nothing at all, and the failure goes to `$COMPOZY_HOME/logs/hooks.log` with a stable code
(memory/services/hooklog.py) and, when the database works, a `memory.session.hook.failed` event.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand
from django.db import OperationalError

from compozy.command import ProductCommand
from memory.domain.enums import Origin
from memory.domain.errors import CompozyError, environment_error
from memory.services import hooks
from memory.services.inputs import Caller


class Command(ProductCommand):
    help = ("Agent hooks: `compozy hook claude-code <event>` reads the hook's JSON on stdin (SessionStart, "
            "UserPromptSubmit, Stop, PreCompact, SessionEnd). It always exits 0; failures go to "
            "$COMPOZY_HOME/logs/hooks.log with a stable code.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("client", help="The agent runtime: claude-code.")
        parser.add_argument("event", help="The hook event, as the client names it (SessionStart, Stop, …).")

    def run_from_argv(self, argv: list[str]) -> None:
        client, event = [*argv[2:4], "", ""][:2]
        try:
            # Django's own run_from_argv, not ProductCommand's: that one prints a domain error and exits non-zero,
            # which is exactly what a hook must never do.
            BaseCommand.run_from_argv(self, argv)
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                hooks.hook_failure_record(code="hook.event_unknown", message="usage: compozy hook claude-code <event>",
                                          client=client, event=event)
        except CompozyError as error:
            code = "hook.event_unknown" if error.details.get("reason") == "usage" else error.code
            hooks.hook_failure_record(code=code, message=error.message, client=client, event=event)
        except BaseException as exc:  # noqa: BLE001 - a hook never breaks the agent; the failure is logged
            # A database held by another process's write, or a full or read-only filesystem, is the environment,
            # not a bug: logged under its stable code (memory.controller.timeout, memory.storage.*).
            translated = environment_error(exc) if isinstance(exc, (OperationalError, OSError)) else None
            if translated is not None:
                hooks.hook_failure_record(code=translated.code, message=translated.message, client=client,
                                          event=event)
                return
            hooks.hook_failure_record(code="hook.internal", message=f"{type(exc).__name__}: {exc}", client=client,
                                      event=event)

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        raw = sys.stdin.buffer.read()
        bootstrap()
        # The same service the running server answers the thin client with (compozy/cli.py): same checks, same
        # failure codes, same output.
        result = hooks.hook_run(
            data=hooks.HookRunInput.parse({"client": options["client"], "event": options["event"],
                                           "stdin": raw.decode("utf-8", "surrogateescape"), "cwd": os.getcwd()}),
            caller=Caller(origin=Origin.CLI))
        if result.output is not None:
            sys.stdout.write(json.dumps(result.output, ensure_ascii=False) + "\n")
