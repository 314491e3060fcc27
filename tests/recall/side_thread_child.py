"""Run by tests/recall/test_side_thread.py in a child process, on a SQLite file under its own COMPOZY_HOME (the
pytest process's test database is in memory, where recall never uses its side thread): every question answered
with the side thread and without it, and what happened, as one JSON document on stdout.

    python -m tests.recall.side_thread_child HOME WORKSPACE
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import timedelta
from pathlib import Path

QUESTIONS = [
    "which database does the billing service use",
    "deploy rollback checklist",
    "who owns the ingest pipeline",
    "postgres migrations locking",
    "retention policy for audit logs",
    "the kafka consumer lag alert",
    "deploymnet rolback",  # typos: the trigram list's 4-grams
    "flaky integration tests on ci",
    "what did we decide about caching",
    "quarterly planning notes",
]

TOPICS = [
    ("Billing Database", "The billing service stores invoices in postgres; migrations lock the invoices table."),
    ("Deploy Checklist", "Before a deploy run the smoke tests; the rollback checklist lives in the runbook."),
    ("Ingest Owner", "The ingest pipeline is owned by the data platform team; Dana is on call this quarter."),
    ("Audit Retention", "Audit logs are kept for 400 days; the retention policy is enforced by a nightly job."),
    ("Consumer Lag", "The kafka consumer lag alert fires above 10,000 messages for five minutes."),
    ("CI Flakes", "Integration tests on ci are flaky when the postgres container starts slowly."),
    ("Caching Decision", "We decided to cache the pricing lookups for five minutes and never cache invoices."),
    ("Planning Notes", "Quarterly planning: the ingest rewrite first, then the billing export."),
]


def _answer(outcome) -> list[tuple]:  # noqa: ANN001
    return [(c.row.root_key, c.filename, c.score, c.parts, c.snippet, c.shadowed_by, c.row.body)
            for c in outcome.winners + outcome.shadowed] + [outcome.warning]


def main(home: Path, workspace: Path) -> dict[str, object]:
    os.environ["COMPOZY_HOME"] = str(home)
    os.environ["DJANGO_SETTINGS_MODULE"] = "compozy.settings"
    import django

    django.setup()
    from memory.bootstrap import bootstrap

    bootstrap()
    from django.db import connection
    from django.db.backends.signals import connection_created

    from memory.domain.models import utc_now
    from memory.recall import pipeline, side_thread
    from memory.recall.query import parse_query
    from memory.services.recall import SearchInput
    from memory.services.resolution import resolve
    from memory.services.scopes import visible_refs
    from tests import helpers as h
    from tests.recall import helpers as rh

    side_connections: list[int] = []

    def opened(sender, **kwargs) -> None:  # noqa: ANN001, ANN003
        if threading.current_thread().name.startswith("compozy-recall-side"):
            side_connections.append(1)

    connection_created.connect(opened)

    rh.ensure_workspace(workspace)
    root = h.workspace_root(workspace)
    # Memories in sessions (session context), and some in the global root under the same filenames (shadowing,
    # and the path with several roots holding memories).
    for index in range(48):
        name, body = TOPICS[index % len(TOPICS)]
        rh.put(root, f"project_{name.lower().replace(' ', '_')}_{index}.md", name=f"{name} {index}",
               body=f"{body} Note {index}.", age=timedelta(days=index % 30, minutes=index),
               session=f"s-{index // 4}")
    for index in range(0, 48, 6):
        name, body = TOPICS[index % len(TOPICS)]
        rh.put(rh.global_root(home), f"project_{name.lower().replace(' ', '_')}_{index}.md", name=f"{name} {index}",
               body=f"{body} Global copy.", scope="global", age=timedelta(days=3))
    h.reindex(workspace)

    now = utc_now()
    compared = differing = concurrent = answered = 0
    for scope in (None, "workspace"):
        for text in QUESTIONS:
            data = SearchInput.parse({"query": text, **({"scope": scope} if scope else {})})
            resolved = resolve(data, h.caller(workspace))
            refs = visible_refs(data, resolved)
            query = parse_query(text)
            answers = []
            for enabled in (False, True, False, True):
                side_thread.enabled = enabled
                before = side_thread.side_runs
                outcome = pipeline.recall(query, refs=refs, config=resolved.config, top_k=5, include_system=False,
                                          now=now)
                concurrent += side_thread.side_runs - before if enabled else 0
                answers.append(_answer(outcome))
            side_thread.enabled = True
            compared += 1
            differing += any(answer != answers[0] for answer in answers)
            answered += len(answers[0]) > 1

    # The side thread keeps its connection from one question to the next, and opens a new one after the caller
    # reconnected (which may mean another database file under the same name).
    def side_connection() -> bool:
        connection.ensure_connection()
        return threading.current_thread().name.startswith("compozy-recall-side")

    in_side = [side_thread.start(side_connection).result() for _ in range(2)]
    kept = len(side_connections)
    connection.close()
    connection.ensure_connection()
    in_side.append(side_thread.start(side_connection).result())
    side_thread.shut_down()
    return {"compared": compared, "differing": differing, "concurrent_runs": concurrent,
            "answered": answered, "side_connections_before_reconnect": kept,
            "side_connections_after_reconnect": len(side_connections), "ran_in_side_thread": in_side,
            "roots": len(visible_refs(SearchInput.parse({"query": "x"}), resolve(SearchInput.parse({"query": "x"}),
                                                                                 h.caller(workspace))))}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
