# PYTHON_ARGCOMPLETE_OK
"""The `compozy` console script: the product's own commands, from any directory.

It lists and runs the commands of the product's apps (memory, serve, mcp, inspector, and those later apps add),
built on `compozy.command.ProductCommand`, and prints the product's version. Django's own management commands
(migrate, flush, dbshell, …) stay under `python manage.py`. Shell completion for bash and zsh comes from
argcomplete over the same parsers (`compozy completion bash|zsh` prints the line to add to a shell's rc file).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

# Nothing heavier than os and sys at import: a hook forwarded to the running service (compozy/hook_client.py) and
# `--version` must not pay for argparse, importlib.metadata or Django.

# The top-level packages of this product. A command of an app under one of them is a product command.
PRODUCT_PACKAGES = ("compozy", "memory", "inspector")
DISTRIBUTION = "compozy-memory"
SHELLS = ("bash", "zsh")


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def product_apps() -> dict[str, str]:
    """name → app, for the commands of the product's own apps (nothing imported yet)."""
    from django.core.management import get_commands

    return {name: app for name, app in sorted(get_commands().items()) if app.split(".")[0] in PRODUCT_PACKAGES}


def product_commands() -> dict[str, Any]:
    """name → command instance, for the commands of the product's own apps."""
    from django.core.management import load_command_class

    return {name: load_command_class(app, name) for name, app in product_apps().items()}


def listed(commands: dict[str, Any]) -> dict[str, Any]:
    return {name: command for name, command in commands.items() if getattr(command, "listed", True)}


def build_parser(commands: dict[str, Any], *, full: bool) -> argparse.ArgumentParser:
    """The top-level parser. `full` adds every command's own arguments (for completion); help needs only names."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="compozy", description="Durable, auditable memory for AI coding agents.",
        epilog="Run `compozy <command> --help` for a command's verbs and flags. Django's own management commands "
               "are under `python manage.py`.")
    parser.add_argument("-V", "--version", action="version", version=f"compozy {version()}")
    subs = parser.add_subparsers(dest="command", metavar="<command>", title="commands")
    for name, command in listed(commands).items():
        sub = subs.add_parser(name, help=_first_line(command.help), description=command.help)
        if full:
            command.add_arguments(sub)
    completion = subs.add_parser("completion", help="Print the shell completion script (bash or zsh).")
    completion.add_argument("shell", choices=SHELLS, help="The shell: bash or zsh.")
    return parser


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if text else ""


def completion_script(shell: str) -> str:
    import argcomplete

    return argcomplete.shellcode(["compozy"], shell=shell)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-V"], ["--version"]):
        # Answered before Django and the commands load: the version is the distribution's metadata alone.
        sys.stdout.write(f"compozy {version()}\n")
        return
    if args[:1] == ["hook"]:
        # The hook surface decides how a hook runs and fails (it never breaks the agent that runs it).
        from compozy.hook_client import run_hook

        run_hook(args, _main)
    _main(args)


def _main(args: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compozy.settings")
    import django

    django.setup()
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(build_parser(product_commands(), full=True))
        return
    apps = product_apps()
    if args and args[0] in apps:
        # Only the command asked for is imported: a hook or `compozy mcp` starts without loading the others.
        from django.core.management import load_command_class

        load_command_class(apps[args[0]], args[0]).run_from_argv(["compozy", *args])
        return
    parser = build_parser(product_commands(), full=False)
    if not args:
        parser.print_help()
        sys.exit(2)
    if args[0] == "completion":
        options = parser.parse_args(args)
        sys.stdout.write(completion_script(options.shell))
        return
    if args[0].startswith("-"):
        parser.parse_args(args)  # --help and --version print and exit; anything else is a usage error
        return
    from compozy.command import did_you_mean

    close = did_you_mean(args[0], [*apps, "completion"])
    hint = f" (did you mean {close!r}?)" if close else ""
    sys.stderr.write(f"compozy: unknown command {args[0]!r}{hint}. Run `compozy --help` for the commands; Django's "
                     "own management commands are under `python manage.py`.\n")
    sys.exit(2)


if __name__ == "__main__":
    main()
