"""A real extractor process for the crash tests (run as a child, never imported by pytest).

    extractor_child.py --workspace DIR stage --session S --text "..." [--text "..."]
    extractor_child.py --workspace DIR drain

It boots like any process that can write (django.setup(), then bootstrap(): migrate and replay). `stage` runs
the session's turns through `extract_turns` (the local provider, the inbox); `drain` drains the inbox through the
controller. The last line of stdout is a JSON summary. COMPOZY_FAULT / COMPOZY_FAULT_SIGNAL kill it where told.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    stage = sub.add_parser("stage")
    stage.add_argument("--session", required=True)
    stage.add_argument("--text", action="append", required=True)
    sub.add_parser("drain")
    args = parser.parse_args()

    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()

    from compozy.config import load_config
    from memory.domain.enums import Origin
    from memory.domain.extraction import Turn
    from memory.extractor.drain import drain_inbox
    from memory.extractor.extraction import SessionSource, extract_turns
    from memory.services.inputs import Caller
    from memory.services.resolution import resolve_workspace

    config = load_config()
    if args.command == "stage":
        identity = resolve_workspace(None, Caller(origin=Origin.CLI, cwd=Path(args.workspace)), create=True)
        assert identity is not None
        turns = [Turn(seq, "user", text) for seq, text in enumerate(args.text, start=1)]
        outcome = extract_turns(source=SessionSource(args.session, args.session, identity.id), turns=turns,
                                context=[], config=config)
        print(json.dumps({"staged": outcome.staged_file, "candidates": outcome.candidate_count}), flush=True)
    else:
        report = drain_inbox(config)
        print(json.dumps({"files": report.files, "failures": report.failures,
                          "candidates": [[c.op, c.applied, c.target_filename] for c in report.candidates]}),
              flush=True)


if __name__ == "__main__":
    main()
