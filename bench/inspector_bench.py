"""Server time of the inspector's pages at N memories (default 10,000), and SQL queries per page.

    .venv/bin/python bench/inspector_bench.py                        # N = 10,000; about a minute (20 s prefill)
    .venv/bin/python bench/inspector_bench.py --quick                # N = 500, 10 requests per page: a smoke run
    .venv/bin/python bench/inspector_bench.py --sizes 1000,10000 --requests 100
    .venv/bin/python bench/inspector_bench.py --profile /tmp/inspector.prof   # cProfile per page: PATH.<N>.<page>

Each size runs in its own worker process, one after the other, with its own fresh COMPOZY_HOME and workspace.

Prefill (not timed): N valid memory files written straight into the workspace root (`<ws>/.compozy/memory/`, prose
over a Zipf vocabulary, provenance spread over the last 60 days, `scope: workspace`), of mixed types: 40% project,
30% reference, 15% user, 15% feedback; then one `catalog_reindex`, which records each file as a hand-edit decision
(with its event) and indexes it through the real catalog. Then one project memory (the detail page's) is edited
EDITS times through `memory_edit` (the controller's path, origin CLI), so it has EDITS + 1 decisions, and
SESSIONS sessions assemble a snapshot (`snapshot_assemble` with a session id) so its page lists where it was
used. That memory is the first project memory the snapshot's index section places.

Pages, each a GET through `django.test.Client` in this process, signed in the way a person is (a one-time link from
`inspector.signin.create_link`, redeemed by POST /inspector/signin). Server time is the time around `client.get`:
URL resolution, the whole middleware stack (session and user lookups included), the view, its services and SQL,
template rendering; no socket, no WSGI server. Every timed response must be 200.
  memories            /inspector/memories/?workspace=<id>                    (default page size, 50)
  memories_limit_10   the same with limit=10          (informational; for the query count)
  memories_limit_200  the same with limit=200         (informational; the largest page allowed)
  memory_detail       /inspector/memories/<file>?scope=workspace&workspace=<id>   (the memory with decisions)
  health              /inspector/?workspace=<id>      (the Health dashboard)
  decisions           /inspector/decisions/?workspace=<id>
  events              /inspector/events/?workspace=<id>
Floors, measured interleaved with the pages, through the same client, middleware and connection:
  floor_healthz       GET /healthz: a plain JsonResponse view (never reads the session or the user)
  floor_signed_in_page  an empty inspector page: a view wrapped in `inspector.views.page` (sign-in check, CSP
                      headers) rendering `base.html` (the inspector's chrome) with an empty content block, so it
                      pays the session and user lookups and the base template. It is served from a URLconf that
                      is the product's with this one path in front (`ROOT_URLCONF` overridden in this process).

Rounds: WARMUP untimed requests per page, then REQUESTS rounds; each round requests every page once, in an order
rotated each round, so every page sees the same background load.

SQL: each page is requested SQL_REPEATS more times inside `CaptureQueriesContext(connection)`; reported are the
number of statements (the session and user lookups included; checked equal on every repeat) and the median of their
summed execute time (timed by a `connection.execute_wrapper`; fetching rows happens outside it, in the view).
The memory list is counted at limit 10, 50 and 200 to show the count does not grow with the page size.

Targets: every page's p95 under TARGET_P95_MS, and at most TARGET_MAX_QUERIES statements on any page.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)

TARGET_P95_MS = 100.0
TARGET_MAX_QUERIES = 25
TYPE_MIX = (("project", 0.40), ("reference", 0.30), ("user", 0.15), ("feedback", 0.15))
EDITS = 5
SQL_REPEATS = 5
SESSIONS = 3
FLOORS = ("floor_healthz", "floor_signed_in_page")
LIST_LIMITS = (10, 50, 200)
FLOOR_PATH = "bench/empty-page"
URLCONF_MODULE = "inspector_bench_urls"
DECISION_ID = re.compile(r"dec_[0-9a-f]{24}")


def main() -> None:
    parser = common.size_runner_parser(__doc__, sizes="10000", seed=20240612, size_aliases=("--n",),
                                       profile="cProfile each page's timed requests into PATH.<N>.<page>")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page")
    parser.add_argument("--warmup", type=int, default=3, help="untimed requests per page before the timed rounds")
    parser.add_argument("--quick", action="store_true", help="a smoke run: N = 500, 10 requests per page")
    parser.add_argument("--show-queries", action="store_true", help="print each page's SQL statements to stderr")
    common.main(parser, coordinate, worker=lambda args: common.worker_process(
        f"inspector-{args.worker}", lambda env: worker(env, args.worker, args)))


def coordinate(_env: None, args: argparse.Namespace) -> dict[str, object]:
    if args.quick:
        args.sizes, args.requests = "500", 10
    sizes = sorted(common.parse_sizes(args.sizes))
    worker_args = ["--seed", str(args.seed), "--requests", str(args.requests), "--warmup", str(args.warmup)]
    if args.show_queries:
        worker_args.append("--show-queries")
    results = common.run_size_workers(__file__, sizes, worker_args, args.profile)
    return {
        "benchmark": "inspector",
        "machine": common.machine(),
        "requests_per_page": args.requests,
        "warmup_per_page": args.warmup,
        "profiled": bool(args.profile),
        "sizes": results,
        "summary": {str(size): results[str(size)]["summary"] for size in sizes},
        "targets": {
            "target_p95_ms": TARGET_P95_MS,
            "every_page_meets_p95_target_at_every_size": all(
                results[str(s)]["targets"]["every_page_meets_p95_target"] for s in sizes),
            "target_max_queries": TARGET_MAX_QUERIES,
            "queries_bounded_at_every_size": all(results[str(s)]["targets"]["queries_bounded"] for s in sizes),
            "query_count_constant_across_page_sizes_at_every_size": all(
                results[str(s)]["list_queries_by_page_size"]["query_count_constant_across_page_sizes"]
                for s in sizes),
            "all_checks_passed_at_every_size": all(results[str(s)]["all_checks_passed"] for s in sizes),
        },
    }


# ---------------------------------------------------------------------------------------------------------------
# The worker: prefill, sign in, time the pages, count their queries.


def prefill(env: common.Env, size: int, seed: int) -> dict[str, object]:
    from memory.domain.enums import Origin
    from memory.models import Decision, Injection
    from memory.services.inputs import Caller
    from memory.services.memories import EditInput, memory_edit
    from memory.services.snapshots import SnapshotInput, snapshot_assemble

    counts = {memory_type: round(size * share) for memory_type, share in TYPE_MIX}
    counts["project"] += size - sum(counts.values())

    def write(home: common.Prefill) -> list[Path]:
        return [path for memory_type, count in counts.items()
                for path in common.write_prose_memories(home.root, count, home.words, home.rng,
                                                        memory_type=memory_type, scope="workspace")]

    home = common.prefill(env, size, seed, write)
    caller, words, ref, workspace_id = home.caller, home.words, home.ref, home.workspace_id
    if home.catalog_rows != size:
        raise SystemExit(f"prefill indexed {home.catalog_rows} memories, wanted {size}")

    # The detail page's memory: a project memory the snapshot index places (the first one it lists), edited through
    # the controller, so its history holds more than the reindex's one decision.
    placed = snapshot_assemble(data=SnapshotInput.parse({}), caller=caller).entries
    detail = next(entry.filename for entry in placed
                  if entry.source == "index" and entry.filename.startswith("project_"))
    edit_ops = []
    for _ in range(EDITS):
        item = common.prose_content(words)
        result = memory_edit(data=EditInput.parse({"filename": detail, "content": item.body,
                                                   "description": item.description}), caller=caller)
        edit_ops.append(str(result.decision.op))
    # Sessions whose snapshots place it.
    for index in range(SESSIONS):
        session_caller = Caller(origin=Origin.CLI, cwd=env.workspace, session_id=f"bench-session-{index}")
        snapshot_assemble(data=SnapshotInput.parse({"session_id": f"bench-session-{index}"}), caller=session_caller)
    return {
        "workspace_id": workspace_id,
        "detail_filename": detail,
        "facts": {
            "memories_by_type": counts,
            "write_files_s": round(home.write_s, 2),
            "reindex_s": round(home.reindex_s, 2),
            "reindexed_files": home.files,
            "catalog_rows": home.catalog_rows,
            "decisions_total": Decision.objects.count(),
            "detail_memory": detail,
            "detail_memory_decisions": Decision.objects.filter(root_key=ref.root_key,
                                                               target_filename=detail).count(),
            "detail_memory_edit_ops": edit_ops,
            "detail_memory_snapshot_injections": Injection.objects.filter(root_key=ref.root_key,
                                                                          filename=detail).count(),
        },
    }


def install_floor_urlconf() -> None:
    """The product's URLconf with one more path in front: an empty inspector page (see the docstring)."""
    import types

    from django.http import HttpRequest, HttpResponse
    from django.template import engines
    from django.test.utils import override_settings
    from django.urls import path

    import compozy.urls
    from inspector.views import page

    template = engines["django"].from_string('{% extends "base.html" %}{% block content %}{% endblock %}')

    @page
    def empty_page(request: HttpRequest) -> HttpResponse:
        return HttpResponse(template.render({}, request))

    module = types.ModuleType(URLCONF_MODULE)
    module.urlpatterns = [path(FLOOR_PATH, empty_page), *compozy.urls.urlpatterns]
    module.handler404 = compozy.urls.handler404
    sys.modules[URLCONF_MODULE] = module
    override_settings(ROOT_URLCONF=URLCONF_MODULE).enable()


def sign_in():  # noqa: ANN201 - a django.test.Client
    from django.test import Client

    from inspector.signin import create_link

    client = Client(HTTP_HOST="127.0.0.1", enforce_csrf_checks=False)
    link = create_link("http://127.0.0.1")
    token = link.split("token=", 1)[1]
    response = client.post("/inspector/signin", {"token": token})
    if response.status_code != 302:
        raise SystemExit(f"sign-in answered {response.status_code}, wanted a 302 redirect")
    return client


def worker(env: common.Env, size: int, args: argparse.Namespace) -> dict[str, object]:
    from urllib.parse import urlencode

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    facts = prefill(env, size, args.seed)
    workspace_id, detail = facts["workspace_id"], facts["detail_filename"]
    install_floor_urlconf()
    client = sign_in()

    on_workspace = urlencode({"workspace": workspace_id})
    urls = {
        "memories": f"/inspector/memories/?{on_workspace}",
        "memories_limit_10": f"/inspector/memories/?{on_workspace}&limit=10",
        "memories_limit_200": f"/inspector/memories/?{on_workspace}&limit=200",
        "memory_detail": f"/inspector/memories/{detail}?{urlencode({'scope': 'workspace', 'workspace': workspace_id})}",
        "health": f"/inspector/?{on_workspace}",
        "decisions": f"/inspector/decisions/?{on_workspace}",
        "events": f"/inspector/events/?{on_workspace}",
        "floor_healthz": "/healthz",
        "floor_signed_in_page": f"/{FLOOR_PATH}",
    }
    pages = [name for name in urls if name not in FLOORS]

    profilers: dict[str, object] = {}
    if args.profile:
        import cProfile

        profilers = {name: cProfile.Profile() for name in pages}

    statuses: dict[str, dict[int, int]] = {name: {} for name in urls}
    bodies: dict[str, bytes] = {}

    def get(name: str, *, timed: bool = False) -> float:
        profiler = profilers.get(name) if timed else None
        if profiler is not None:
            profiler.enable()
        started = time.perf_counter()
        response = client.get(urls[name])
        elapsed = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
        statuses[name][response.status_code] = statuses[name].get(response.status_code, 0) + 1
        bodies[name] = response.content
        return elapsed

    common.log(f"N={size}: {args.warmup} warm-up requests per page")
    for _ in range(args.warmup):
        for name in urls:
            get(name)
    warm_statuses = {name: dict(counts) for name, counts in statuses.items()}
    for counts in statuses.values():
        counts.clear()

    common.log(f"N={size}: {args.requests} rounds of {len(urls)} requests")
    names = list(urls)
    seconds: dict[str, list[float]] = {name: [] for name in urls}
    started = time.perf_counter()
    for index in range(args.requests):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(get(name, timed=True))
    common.log(f"N={size}: timed rounds took {time.perf_counter() - started:.1f} s")

    queries: dict[str, dict[str, object]] = {}
    for name in urls:
        counts, sql_seconds, codes = [], [], set()
        for repeat in range(SQL_REPEATS):
            # CaptureQueriesContext counts; its times are rounded to the millisecond, so a wrapper times each
            # statement.
            timer = StatementTimer()
            with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timer):
                codes.add(client.get(urls[name]).status_code)
            statements = captured.captured_queries
            counts.append(len(statements))
            sql_seconds.append(sum(timer.seconds))
            if args.show_queries and repeat == 0:
                listing = "\n".join(f"  {seconds * 1000:8.3f} ms  {q['sql'][:400]}"
                                     for seconds, q in zip(timer.seconds, statements, strict=False))
                common.log(f"N={size}: {name}: {len(statements)} statements\n{listing}")
        queries[name] = {"statuses": codes, "queries": counts[0], "same_count_every_time": len(set(counts)) == 1,
                         "sql_ms": round(common.percentile(sql_seconds, 0.5) * 1000, 3)}

    for name, profiler in profilers.items():
        common.dump_profile(profiler, f"{args.profile}.{name}", f"{name} at N={size}")

    floors = {name: common.timing_summary(seconds[name]) for name in FLOORS}
    figures: dict[str, dict[str, object]] = {}
    for name in pages:
        block: dict[str, object] = {**common.timing_summary(seconds[name]), "queries": queries[name]["queries"],
                                    "sql_ms": queries[name]["sql_ms"], "bytes": len(bodies[name])}
        for floor in FLOORS:
            block[f"p95_over_{floor}_p95"] = round(block["p95_ms"] / floors[floor]["p95_ms"], 2)
            block[f"p50_minus_{floor}_p50_ms"] = round(block["p50_ms"] - floors[floor]["p50_ms"], 3)
        block["target_p95_ms"] = TARGET_P95_MS
        block["meets_target"] = block["p95_ms"] < TARGET_P95_MS
        figures[name] = block
    for name in FLOORS:
        figures[name] = {**floors[name], "queries": queries[name]["queries"], "sql_ms": queries[name]["sql_ms"],
                         "bytes": len(bodies[name])}

    list_counts = {str(limit): queries["memories" if limit == 50 else f"memories_limit_{limit}"]["queries"]
                   for limit in LIST_LIMITS}
    max_queries = max(queries[name]["queries"] for name in pages)
    page_text = {name: bodies[name].decode("utf-8", "replace") for name in pages}
    checks = {
        "every_timed_response_200": all(set(statuses[name]) == {200} for name in urls),
        "every_warmup_response_200": all(set(warm_statuses[name]) == {200} for name in urls),
        "every_counted_response_200": all(queries[name]["statuses"] == {200} for name in urls),
        "query_count_stable_across_repeats": all(queries[name]["same_count_every_time"] for name in urls),
        "catalog_rows_equal_n": facts["facts"]["catalog_rows"] == size,
        "detail_edits_all_update": all(op == "update" for op in facts["facts"]["detail_memory_edit_ops"]),
        "list_rows_at_limit_10": page_text["memories_limit_10"].count("<td><code>") == 10,
        "list_rows_at_limit_50": page_text["memories"].count("<td><code>") == 50,
        "list_rows_at_limit_200": page_text["memories_limit_200"].count("<td><code>") == min(200, size),
        "detail_page_lists_every_decision": (len(set(DECISION_ID.findall(page_text["memory_detail"])))
                                             == facts["facts"]["detail_memory_decisions"]),
        "detail_page_lists_its_sessions": all(f"bench-session-{i}" in page_text["memory_detail"]
                                              for i in range(SESSIONS)),
        "decisions_page_rows": len(set(DECISION_ID.findall(page_text["decisions"]))) == 50,
        "health_page_status_ok": 'class="status status-ok"' in page_text["health"],
        "health_page_indexed_files_equal_n": f"<dt>Indexed files</dt><dd>{size}</dd>" in page_text["health"],
    }
    expected_true = [key for key, value in checks.items() if isinstance(value, bool)]
    return {
        "n": size,
        "prefill": facts["facts"],
        "urls": {name: url.replace(workspace_id, "<workspace>") for name, url in urls.items()},
        "pages": figures,
        "list_queries_by_page_size": {
            "limit_to_queries": list_counts,
            "query_count_constant_across_page_sizes": len(set(list_counts.values())) == 1,
        },
        "statuses": {name: {str(code): count for code, count in counts.items()} for name, counts in statuses.items()},
        "summary": {
            "floor_healthz_p50_ms": floors["floor_healthz"]["p50_ms"],
            "floor_healthz_p95_ms": floors["floor_healthz"]["p95_ms"],
            "floor_signed_in_page_p50_ms": floors["floor_signed_in_page"]["p50_ms"],
            "floor_signed_in_page_p95_ms": floors["floor_signed_in_page"]["p95_ms"],
            **{f"{name}_p95_ms": figures[name]["p95_ms"] for name in pages},
            **{f"{name}_queries": figures[name]["queries"] for name in pages},
        },
        "targets": {
            "target_p95_ms": TARGET_P95_MS,
            "meets_target": {name: figures[name]["meets_target"] for name in pages},
            "every_page_meets_p95_target": all(figures[name]["meets_target"] for name in pages),
            "max_queries": max_queries,
            "target_max_queries": TARGET_MAX_QUERIES,
            "queries_bounded": max_queries <= TARGET_MAX_QUERIES,
        },
        "checks": checks,
        "all_checks_passed": all(checks[key] for key in expected_true),
        "failed_checks": [key for key in expected_true if not checks[key]],
    }


class StatementTimer:
    """A `connection.execute_wrapper`: the time of each statement's execute, in order."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def __call__(self, execute, sql, params, many, context):  # noqa: ANN001, ANN204
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds.append(time.perf_counter() - started)


if __name__ == "__main__":
    main()
