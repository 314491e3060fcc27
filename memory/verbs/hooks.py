"""The hook noun's one verb: an agent runtime's hook call, forwarded by the thin `compozy hook` client over the
Unix socket (compozy/cli.py). It has no CLI form of its own (`compozy hook` is the command, and it falls back to
calling the same service in-process) and no MCP tool: agents never drive their own ledger."""

from __future__ import annotations

from memory.services import hooks

from . import Route, Verb

HOOK_ROUTE = "/api/hooks/{client}/{event}"

VERBS = [
    Verb(
        input=hooks.HookRunInput, service=hooks.hook_run, routes=(Route("POST", HOOK_ROUTE),),
        summary=("Run an agent hook (claude-code SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd) with "
                 "its stdin as `stdin`: answers what the hook prints, and logs a failure instead of raising it."),
    ),
]
