"""`compozy memory …` (= `python manage.py memory …`): the operator CLI over memory.services.

Each verb parses its flags, calls one service, and renders the result: a readable table by default, or the
same JSON document the HTTP API returns with `-o json` (`-o jsonl` writes one list item per line). Errors are
`{code, message, details}` with a non-zero exit code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.cli import render
from memory.domain.document import decode_utf8
from memory.domain.enums import Origin
from memory.domain.errors import CompozyError, ValidationError
from memory.services import catalog, decisions, history, memories, promote, recall, snapshots
from memory.services.inputs import Caller

VERBS_HELP = """verbs:
  write       write a memory through the controller
  edit        change a memory's content, name or description
  delete      delete a memory
  list        list memories, newest first (counted cursor pages)
  search      recall: rank memories for a question or task
  snapshot    the frozen memory section for a session's prompt (and its injection log)
  promote     copy a memory into another scope
  token       rotate the API bearer token
  show        print one memory
  decisions   list, show, revert or prune controller decisions
  history     the legacy operation history over memory events
  health      catalog drift, unapplied decisions and counts
  reindex     re-derive the catalog from the Markdown on disk
"""


class MemoryParser(CommandParser):
    """Usage errors become memory.validation, so `-o json` callers get the same error shape as any other."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValidationError(f"{self.prog}: {message}", details={"reason": "usage"})


def _output_from_argv(argv: list[str]) -> str:
    for index, arg in enumerate(argv):
        if arg in ("-o", "--output") and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--output="):
            return arg.split("=", 1)[1]
        if arg.startswith("-o") and len(arg) > 2:
            return arg[2:]
    return "human"


def read_content(value: str | None) -> str | None:
    """`--content` takes text, `@file` or `-` (stdin). Bytes must be UTF-8."""
    if value is None:
        return None
    if value == "-":
        return decode_utf8(sys.stdin.buffer.read())
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            return decode_utf8(path.read_bytes())
        except OSError as exc:
            raise ValidationError(f"Cannot read {path}: {exc.strerror}.", details={"field": "content", "reason": "unreadable"}) from None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 arrive from argv as lone surrogates.
        raise ValidationError("The input is not valid UTF-8.", details={"field": "content", "reason": "encoding"}) from None
    return value


class Command(BaseCommand):
    help = "Durable agent memory: write, edit, delete, list, show, decisions, history, health, reindex."
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("epilog", VERBS_HELP)
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = MemoryParser
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="verb", parser_class=MemoryParser)

        def verb(name: str, help_text: str) -> CommandParser:
            sub = verbs.add_parser(name, help=help_text, description=help_text)
            sub.add_argument("-o", "--output", default="human", choices=render.OUTPUTS,
                             help="human (default), json or jsonl")
            return sub

        def selectors(sub: CommandParser, *, system: bool = False) -> None:
            sub.add_argument("--scope", help="global, workspace or agent")
            sub.add_argument("--agent", dest="agent_name", help="agent name (agent scope)")
            sub.add_argument("--agent-tier", dest="agent_tier", help="workspace (default) or global")
            sub.add_argument("--workspace", default=os.environ.get("COMPOZY_WORKSPACE") or None,
                             help="workspace ULID or path (default: $COMPOZY_WORKSPACE, then the current directory)")
            if system:
                sub.add_argument("--include-system", action="store_true", help="include _system/ artifacts")

        write = verb("write", "Write a memory through the controller.")
        write.add_argument("--type", help="user, feedback, project or reference")
        write.add_argument("--name")
        write.add_argument("--description")
        write.add_argument("--content", required=True, help="text, @file or - for stdin")
        write.add_argument("--dry-run", action="store_true", help="decide without writing")
        selectors(write)

        edit = verb("edit", "Change a memory's content, name or description.")
        edit.add_argument("filename")
        edit.add_argument("--content", help="text, @file or - for stdin")
        edit.add_argument("--name")
        edit.add_argument("--description")
        edit.add_argument("--dry-run", action="store_true")
        selectors(edit)

        delete = verb("delete", "Delete a memory through the controller.")
        delete.add_argument("filename")
        delete.add_argument("--dry-run", action="store_true")
        selectors(delete)

        listing = verb("list", "List memories (counted cursor pages, default 50, at most 200).")
        listing.add_argument("--type")
        listing.add_argument("--sort", default="recent", help="recent (default) or name")
        listing.add_argument("--cursor")
        listing.add_argument("--limit", type=int)
        selectors(listing, system=True)

        search = verb("search", "Recall: rank memories for a natural-language query in the visible scopes.")
        search.add_argument("query")
        search.add_argument("--top-k", dest="top_k", type=int, help="results to return (default 5, at most 20)")
        selectors(search, system=True)

        snap = verb("snapshot", "The frozen memory section a session's prompt starts with.")
        snap.add_argument("--session", dest="session_id", help="record (or return) this session's snapshot")
        snap.add_argument("--parent-session", dest="parent_session_id",
                          help="a sub-agent: return exactly the parent session's snapshot")
        snap.add_argument("--query", help="a task description or question: adds a recall block")
        snap.add_argument("--show-log", action="store_true", help="list the entries injected into --session")
        selectors(snap)

        promote = verb("promote", "Copy a memory into another scope through the controller.")
        promote.add_argument("filename")
        promote.add_argument("--from", dest="from_scope", required=True, help="global, workspace, agent[:tier]")
        promote.add_argument("--to", dest="to_scope", required=True, help="global, workspace, agent[:tier]")
        promote.add_argument("--agent", dest="agent_name", help="the agent, when either side is agent scope")
        promote.add_argument("--workspace", default=os.environ.get("COMPOZY_WORKSPACE") or None)
        promote.add_argument("--dry-run", action="store_true")

        token = verb("token", "The API bearer token in $COMPOZY_HOME/token.")
        token.add_argument("action", choices=["rotate", "path"], help="rotate: replace it; path: where it is")

        show = verb("show", "Print one memory.")
        show.add_argument("filename")
        selectors(show, system=True)

        decision_parser = verb("decisions", "Controller decisions: list, show, revert, prune.")
        decision_verbs = decision_parser.add_subparsers(dest="decision_verb", required=True, metavar="action",
                                                        parser_class=MemoryParser)
        d_list = decision_verbs.add_parser("list", help="list decisions, newest first")
        d_list.add_argument("--filename")
        d_list.add_argument("--op")
        d_list.add_argument("--origin", help="cli, http, uds, tool, file, extractor, dreaming or provider")
        d_list.add_argument("--since", help="RFC 3339 timestamp or an age such as 24h or 7d")
        d_list.add_argument("--cursor")
        d_list.add_argument("--limit", type=int)
        d_show = decision_verbs.add_parser("show", help="show one decision with its contents and trace")
        d_show.add_argument("decision_id")
        d_revert = decision_verbs.add_parser("revert", help="undo a decision with a new decision")
        d_revert.add_argument("decision_id")
        d_revert.add_argument("--dry-run", action="store_true")
        for sub in (d_list, d_show, d_revert):
            sub.add_argument("-o", "--output", default="human", choices=render.OUTPUTS)
            selectors(sub)
        d_prune = decision_verbs.add_parser(
            "prune", help="delete applied decisions older than memory.decisions.prune_after_applied_days, keeping "
                          "each existing file's latest ones and every unapplied one")
        d_prune.add_argument("--dry-run", action="store_true", help="count only; delete nothing")
        d_prune.add_argument("-o", "--output", default="human", choices=render.OUTPUTS)

        hist = verb("history", "Operation history (memory.write, memory.delete, memory.search, memory.reindex).")
        hist.add_argument("--limit", type=int)
        hist.add_argument("--operation")
        hist.add_argument("--since")
        selectors(hist)

        health = verb("health", "Catalog drift, unapplied decisions and counts.")
        selectors(health, system=True)

        reindex = verb("reindex", "Re-derive the catalog from disk; records hand edits as decisions.")
        reindex.add_argument("--rebuild", action="store_true",
                             help="drop and re-insert every row instead of writing only the rows that differ")
        selectors(reindex, system=True)

    def run_from_argv(self, argv: list[str]) -> None:
        output = _output_from_argv(argv)
        try:
            super().run_from_argv(argv)
        except CompozyError as error:
            render.emit_error(error.to_dict(), output if output in render.OUTPUTS else "human")
            sys.exit(error.exit_code)

    def handle(self, *args: Any, **options: Any) -> None:
        from memory.bootstrap import bootstrap

        bootstrap()
        caller = Caller(origin=Origin.CLI, cwd=Path.cwd(), session_id=os.environ.get("COMPOZY_SESSION_ID") or None)
        verb = options["verb"]
        handler = getattr(self, f"_verb_{verb}")
        handler(options, caller)

    # ----- verbs: parse, call one service, render ----------------------------------------------------------------

    @staticmethod
    def _fields(options: dict[str, Any], *names: str) -> dict[str, Any]:
        return {name: options.get(name) for name in names if options.get(name) not in (None, False)}

    _SELECTORS = ("scope", "agent_name", "agent_tier", "workspace")

    def _verb_write(self, options: dict[str, Any], caller: Caller) -> None:
        fields = self._fields(options, "type", "name", "description", "dry_run", *self._SELECTORS)
        data = memories.WriteInput.parse({**fields, "content": read_content(options["content"])})
        result = memories.memory_write(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_write)

    def _verb_edit(self, options: dict[str, Any], caller: Caller) -> None:
        fields = self._fields(options, "filename", "name", "description", "dry_run", *self._SELECTORS)
        data = memories.EditInput.parse({**fields, "content": read_content(options.get("content"))})
        result = memories.memory_edit(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_write)

    def _verb_delete(self, options: dict[str, Any], caller: Caller) -> None:
        data = memories.DeleteInput.parse(self._fields(options, "filename", "dry_run", *self._SELECTORS))
        result = memories.memory_delete(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_write)

    def _verb_list(self, options: dict[str, Any], caller: Caller) -> None:
        data = memories.ListInput.parse(
            self._fields(options, "type", "sort", "cursor", "limit", "include_system", *self._SELECTORS)
            | ({"limit": options["limit"]} if options.get("limit") is not None else {})
        )
        result = memories.memory_list(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_list, items_key="memories")

    def _verb_search(self, options: dict[str, Any], caller: Caller) -> None:
        data = recall.SearchInput.parse(
            self._fields(options, "query", "include_system", *self._SELECTORS)
            | ({"top_k": options["top_k"]} if options.get("top_k") is not None else {})
        )
        render.emit(recall.memory_search(data=data, caller=caller).to_json(), options["output"], render.human_search,
                    items_key="results")

    def _verb_snapshot(self, options: dict[str, Any], caller: Caller) -> None:
        if options["show_log"]:
            if not options.get("session_id"):
                raise ValidationError("--show-log needs --session.", details={"field": "session_id"})
            data = snapshots.SnapshotLogInput.parse(self._fields(options, "session_id", *self._SELECTORS))
            render.emit(snapshots.snapshot_log(data=data, caller=caller).to_json(), options["output"],
                        render.human_snapshot_log, items_key="injections")
            return
        data = snapshots.SnapshotInput.parse(
            self._fields(options, "session_id", "parent_session_id", "query", *self._SELECTORS))
        render.emit(snapshots.snapshot_assemble(data=data, caller=caller).to_json(), options["output"],
                    lambda document: document["text"].rstrip("\n"))

    def _verb_promote(self, options: dict[str, Any], caller: Caller) -> None:
        data = promote.PromoteInput.parse(self._fields(options, "filename", "from_scope", "to_scope", "agent_name",
                                                       "workspace", "dry_run"))
        render.emit(promote.memory_promote(data=data, caller=caller).to_json(), options["output"], render.human_write)

    def _verb_token(self, options: dict[str, Any], caller: Caller) -> None:
        from memory.api.auth import rotate_token, token_path

        if options["action"] == "rotate":
            rotate_token()
        document = {"path": str(token_path()), "rotated": options["action"] == "rotate"}
        render.emit(document, options["output"],
                    lambda d: ("New token written to " if d["rotated"] else "The token is in ") + d["path"])

    def _verb_show(self, options: dict[str, Any], caller: Caller) -> None:
        data = memories.ShowInput.parse(self._fields(options, "filename", "include_system", *self._SELECTORS))
        result = memories.memory_show(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_show)

    def _verb_decisions(self, options: dict[str, Any], caller: Caller) -> None:
        action = options["decision_verb"]
        if action == "list":
            data = decisions.DecisionListInput.parse(
                self._fields(options, "filename", "op", "origin", "since", "cursor", *self._SELECTORS)
                | ({"limit": options["limit"]} if options.get("limit") is not None else {})
            )
            result = decisions.decision_list(data=data, caller=caller)
            render.emit(result.to_json(), options["output"], render.human_decisions, items_key="decisions")
        elif action == "show":
            data = decisions.DecisionIdInput.parse(self._fields(options, "decision_id", *self._SELECTORS))
            render.emit(decisions.decision_show(data=data, caller=caller).to_json(), options["output"],
                        render.human_decision)
        elif action == "prune":
            data = decisions.PruneInput.parse(self._fields(options, "dry_run"))
            render.emit(decisions.decision_prune(data=data, caller=caller).to_json(), options["output"],
                        render.human_prune, items_key="roots")
        else:
            data = decisions.RevertInput.parse(self._fields(options, "decision_id", "dry_run", *self._SELECTORS))
            render.emit(decisions.decision_revert(data=data, caller=caller).to_json(), options["output"],
                        render.human_revert)

    def _verb_history(self, options: dict[str, Any], caller: Caller) -> None:
        data = history.HistoryInput.parse(
            self._fields(options, "operation", "since", *self._SELECTORS)
            | ({"limit": options["limit"]} if options.get("limit") is not None else {})
        )
        result = history.history_list(data=data, caller=caller)
        render.emit(result.to_json(), options["output"], render.human_history, items_key="history")

    def _verb_health(self, options: dict[str, Any], caller: Caller) -> None:
        data = catalog.HealthInput.parse(self._fields(options, "include_system", *self._SELECTORS))
        render.emit(catalog.health_get(data=data, caller=caller).to_json(), options["output"], render.human_health)

    def _verb_reindex(self, options: dict[str, Any], caller: Caller) -> None:
        data = catalog.ReindexInput.parse(self._fields(options, "include_system", "rebuild", *self._SELECTORS))
        progress = None
        if sys.stderr.isatty() and options["output"] == "human":
            def progress(done: int, total: int) -> None:
                sys.stderr.write(f"\rreindexing {done}/{total} files")
                if done >= total:
                    sys.stderr.write("\n")
                sys.stderr.flush()
        result = catalog.catalog_reindex(data=data, caller=caller, progress=progress)
        render.emit(result.to_json(), options["output"], render.human_reindex)
