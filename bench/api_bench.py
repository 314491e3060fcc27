"""The HTTP/UDS API against a live `compozy serve`, beside the in-process service call: round trips and writes.

    .venv/bin/python bench/api_bench.py
    .venv/bin/python bench/api_bench.py --memories 1000 --requests 200 --clients 8 --writes-per-client 50

One process, one fresh COMPOZY_HOME (created by `common.start()` before Django is imported), one server.

Prefill (not timed): `--memories` prose memory files written straight into the workspace root
(`<ws>/.compozy/memory/project_<unique>.md`, `common.write_prose_memories`), then one `catalog_reindex`, both
in-process. Then `compozy serve --bind 127.0.0.1:<free port> --no-cluster` starts as a subprocess (cwd the
workspace, COMPOZY_HOME the same home) and the run waits for /healthz and the Unix socket.

Part 1, round trips. Two verbs:
  search   POST /api/memory/search {"query": <question>, "workspace": <ws>}; in-process
           `memory.services.recall.memory_search` with the same input
  show     GET /api/memory/<filename>?workspace=<ws> for an existing prefilled file; in-process
           `memory.services.memories.memory_show` with the same input
The in-process calls use Caller(origin=CLI, cwd=None), as the API's adapter does with origin http/uds, on the
benchmark's own Django connection(s) to the same database (WAL: readers run beside the server).
Three variants, each over the same `--requests` items (questions from `common.prose_queries`, filenames in a fixed
shuffled order):
  tcp          httpx over 127.0.0.1:<port> with the bearer token from $COMPOZY_HOME/token
  uds          httpx over $COMPOZY_HOME/run/compozy.sock (httpx.HTTPTransport(uds=...))
  uds_stdlib   the standard library's http.client over the same socket, one persistent connection per client:
               httpx spends 0.5-0.7 ms of client CPU per request here, which is the caller's cost, so the target
               is reported for both clients
  in_process   the service function called directly (no JSON; its to_json()+json.dumps is timed separately,
               as `in_process_serialization`, to explain part of the gap)
A round trip is timed from the call to the full response body read (the client's JSON decode is not timed).
Concurrency 1: the main thread runs item by item, the three variants in an order that rotates each item.
Concurrency `--clients` (8): that many persistent threads, each with its own httpx clients (and, for in_process,
its own Django connection), run in blocks: for each round, all threads do `--block` items over one variant, then
the next variant, the order rotating each round; `--requests` items per variant in all. The in-process variant
runs with the same number of threads, so its GIL and SQLite contention are in its numbers too. Each variant's
`mean_calls_in_flight` is the sum of its round trips over the wall time of its blocks (Little's law): the
socket's requests are all in flight together and queue at the server (near `--clients`), while the in-process
threads take turns on one GIL, and when a thread keeps it from one call to the next the calls run one after
another and each times the bare call (near 1). The in-process p50 at concurrency `--clients` moves with it.
`cpu_per_call_ms` splits each variant's CPU per call at that concurrency between the server's processes (/proc)
and this process (the clients, and the in-process calls themselves): with the machine's cores busy, the socket's
p50 follows the sum, the in-process p50 the GIL-bound call.
Warm-up (untimed): `--warmup` distinct items per variant and concurrency before the timed items.

Part 1b, CPU per request: `CPU_REQUESTS` sequential GET /healthz, then as many GET show, over the socket with the
standard library's client; the server's user+system CPU (all its processes, from /proc) and the client's (this
process, getrusage) per request. /healthz is a plain Django view with no database: what gunicorn, the socket and
Django's middleware cost on their own.

Part 2, writes under load: `--clients` threads, each with its own httpx client over TCP with the token, each
POST /api/memory `--writes-per-client` distinct project memories (words unique per memory, `common.Words`, so the
controller's lexical-overlap rule sees none as related) into a second, fresh workspace of the same server (created
in-process beforehand), started together behind a barrier. Writes/s (successes over the phase's wall time),
p50/p95, non-200 responses by status and error code. Then the three counts for that workspace root: files
project_*.md on disk, 'add' decisions with applied_at set (sqlite3 on $COMPOZY_HOME/compozy.db), catalog rows
(non-system); each must equal the successful writes.

Target: over the socket, within 2 ms of the in-process call at p50 (each verb, at concurrency 1 and `--clients`).
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (must come before Django)
from live import LiveServe, start_serve, stop_serve  # noqa: E402

TARGET_UDS_OVER_IN_PROCESS_P50_MS = 2.0
WARMUP_SEED_OFFSET = 1_000_003
HTTP_TIMEOUT_S = 60.0  # above the controller's 30 s lock timeout: a timeout there comes back as an answer
JOB_TIMEOUT_S = 600.0  # no block of work may take longer than this
CPU_REQUESTS = 1000  # sequential requests per path when splitting a round trip's CPU between server and client


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--memories", type=int, default=1000, help="prefilled memories in the workspace")
    parser.add_argument("--requests", type=int, default=200, help="timed items per (verb, variant, concurrency)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed items per (verb, variant, concurrency)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (threads)")
    parser.add_argument("--block", type=int, default=5, help="items per thread per block at concurrency > 1")
    parser.add_argument("--writes-per-client", type=int, default=50)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--no-diagnostics", action="store_true",
                        help="skip the informational variants at concurrency 1 (healthz, Django test client, "
                             "in-process on a new connection)")
    # SIGTERM (and SIGINT, even in a background job) end the run through the cleanup of `run` and `common.main`.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def measure(env: common.Env, args: argparse.Namespace) -> dict[str, Any]:
        if args.requests % args.clients or (args.requests // args.clients) % args.block:
            parser.error("--requests must be a multiple of --clients * --block")
        document, server, pool = run(env, args)
        for thread in pool:
            thread.stop()
        common.log(f"server stopped (exit code {stop_serve(server)})")
        return document

    common.main(parser, measure, home="api")


# ---------------------------------------------------------------------------------------------------------------
# Persistent client threads: each owns its httpx clients and (for in-process calls) its Django connection.


class ClientThread(threading.Thread):
    def __init__(self, index: int, make_clients: Callable[[], dict[str, Any]]) -> None:
        super().__init__(name=f"client-{index}", daemon=True)
        self.index = index
        self._make_clients = make_clients
        self.clients: dict[str, Any] = {}
        self.inbox: queue.Queue = queue.Queue()
        self.outbox: queue.Queue = queue.Queue()

    def run(self) -> None:
        self.clients = self._make_clients()
        try:
            while True:
                try:
                    job = self.inbox.get(timeout=JOB_TIMEOUT_S)
                except queue.Empty:
                    return
                if job is None:
                    return
                try:
                    self.outbox.put(("ok", job(self)))
                except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                    self.outbox.put(("error", exc))
        finally:
            for client in self.clients.values():
                client.close()
            from django.db import connections

            connections.close_all()

    def stop(self) -> None:
        if self.is_alive():
            self.inbox.put(None)
            self.join(timeout=30)


def run_on_all(pool: list[ClientThread], job: Callable[[ClientThread], Any]) -> list[Any]:
    for thread in pool:
        thread.inbox.put(job)
    results = []
    for thread in pool:
        status, value = thread.outbox.get(timeout=JOB_TIMEOUT_S)
        if status == "error":
            raise value
        results.append(value)
    return results


# ---------------------------------------------------------------------------------------------------------------
# One request per variant. Each returns (seconds, status, error code or "", result count or None).


class StdlibResponse:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


class StdlibUnixClient:
    """HTTP/1.1 over the Unix socket with the standard library's http.client, one persistent connection: the
    lightest ordinary client, so its round trip shows what the server adds rather than what httpx costs."""

    def __init__(self, socket_path: str) -> None:
        import http.client
        import socket

        class UnixConnection(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(socket_path)

        self._connection = UnixConnection("localhost", timeout=HTTP_TIMEOUT_S)

    def _request(self, method: str, path: str, body: bytes | None = None) -> StdlibResponse:
        import http.client

        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (1, 2):
            try:
                self._connection.request(method, path, body=body, headers=headers)
                response = self._connection.getresponse()
                return StdlibResponse(response.status, dict(response.getheaders()), response.read())
            except (http.client.HTTPException, OSError):
                # The server may close an idle keep-alive connection (after 75 s, or on restart): reconnect once,
                # as any persistent client does.
                self._connection.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str, params: dict[str, str] | None = None) -> StdlibResponse:
        from urllib.parse import urlencode

        return self._request("GET", f"{path}?{urlencode(params)}" if params else path)

    def post(self, path: str, json: Any = None) -> StdlibResponse:  # noqa: A002 - httpx's keyword
        import json as json_module

        return self._request("POST", path, json_module.dumps(json).encode())

    def close(self) -> None:
        self._connection.close()


def error_code(response) -> str:  # noqa: ANN001
    try:
        return str(response.json().get("code", ""))
    except (ValueError, AttributeError):
        return f"non-json ({response.headers.get('content-type', '')})"


def http_call(client, verb: str, item: str, workspace: str) -> tuple[float, int, str, int | None]:  # noqa: ANN001
    import httpx

    started = time.perf_counter()
    try:
        if verb == "search":
            response = client.post("/api/memory/search", json={"query": item, "workspace": workspace})
        else:
            response = client.get(f"/api/memory/{item}", params={"workspace": workspace})
    except (httpx.HTTPError, OSError) as exc:
        return time.perf_counter() - started, 0, f"transport:{type(exc).__name__}", None
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        return elapsed, response.status_code, error_code(response), None
    body = response.json()
    return elapsed, 200, "", len(body["results"]) if verb == "search" else 1


class InProcess:
    """The service calls, with the same input the API's adapter builds from the request."""

    def __init__(self, workspace: str) -> None:
        from memory.domain.enums import Origin
        from memory.services.inputs import Caller
        from memory.services.memories import ShowInput, memory_show
        from memory.services.recall import SearchInput, memory_search

        self.workspace = workspace
        self.caller = Caller(origin=Origin.CLI, cwd=None)
        self._search, self._show = memory_search, memory_show
        self._search_input, self._show_input = SearchInput, ShowInput

    def call(self, verb: str, item: str,
             serialization: list[float] | None = None) -> tuple[float, int, str, int | None]:
        from memory.domain.errors import CompozyError

        started = time.perf_counter()
        try:
            if verb == "search":
                result = self._search(data=self._search_input.parse({"query": item, "workspace": self.workspace}),
                                      caller=self.caller)
            else:
                result = self._show(data=self._show_input.parse({"filename": item, "workspace": self.workspace}),
                                    caller=self.caller)
        except CompozyError as exc:
            return time.perf_counter() - started, -1, exc.code, None
        elapsed = time.perf_counter() - started
        if serialization is not None:
            started = time.perf_counter()
            json.dumps(result.to_json())
            serialization.append(time.perf_counter() - started)
        return elapsed, 200, "", len(result.results) if verb == "search" else 1


def single_client_calls(verb: str, workspace: str, clients: dict[str, Any], in_process: InProcess,
                        diagnostics: bool, helper: ClientThread, token: str) -> dict[str, Callable]:
    """The variants run at concurrency 1, each a function of (item, serialization list)."""
    calls: dict[str, Callable] = {
        "tcp": lambda item, _s: http_call(clients["tcp"], verb, item, workspace),
        "uds": lambda item, _s: http_call(clients["uds"], verb, item, workspace),
        "in_process": lambda item, s: in_process.call(verb, item, s),
        "uds_stdlib": lambda item, _s: http_call(clients["uds_stdlib"], verb, item, workspace),
    }
    if not diagnostics:
        return calls
    from django.test import Client

    django_client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")

    def healthz(transport: str) -> Callable:
        def call(_item: str, _s: object) -> tuple[float, int, str, int | None]:
            started = time.perf_counter()
            response = clients[transport].get("/healthz")
            return time.perf_counter() - started, response.status_code, "", None
        return call

    def django_stack(item: str, _s: object) -> tuple[float, int, str, int | None]:
        started = time.perf_counter()
        if verb == "search":
            response = django_client.post("/api/memory/search", data={"query": item, "workspace": workspace},
                                          content_type="application/json")
        else:
            response = django_client.get(f"/api/memory/{item}", {"workspace": workspace})
        elapsed = time.perf_counter() - started
        return elapsed, response.status_code, "" if response.status_code == 200 else error_code(response), None

    def new_connection(item: str, _s: object) -> tuple[float, int, str, int | None]:
        # On a helper thread, so the main thread's connection stays open for the other variants.
        def job(_thread: ClientThread) -> tuple[float, int, str, int | None]:
            from django.db import connections

            connections.close_all()
            return InProcess(workspace).call(verb, item)

        helper.inbox.put(job)
        status, value = helper.outbox.get(timeout=JOB_TIMEOUT_S)
        if status == "error":
            raise value
        return value

    calls["healthz_tcp"] = healthz("tcp")
    calls["healthz_uds"] = healthz("uds")
    calls["healthz_uds_stdlib"] = healthz("uds_stdlib")
    calls["django_test_client"] = django_stack
    calls["in_process_new_connection"] = new_connection
    return calls


DIAGNOSTICS_NOTE = {
    "healthz_tcp": "GET /healthz over TCP: a plain Django view, no DRF, no database (transport + gunicorn + "
                   "middleware + httpx floor)",
    "healthz_uds": "GET /healthz over the socket",
    "healthz_uds_stdlib": "GET /healthz over the socket with the standard library's http.client",
    "uds_stdlib": "the same request over the socket with the standard library's http.client (one persistent "
                  "connection) instead of httpx: the server's share of the round trip without httpx's own cost",
    "django_test_client": "the same request through Django's test client in this process: middleware, DRF, auth, "
                          "the view, JSON rendering, on a persistent database connection; no gunicorn, no socket",
    "in_process_new_connection": "the in-process service call on a database connection opened just for it (what "
                                 "the server does per request with CONN_MAX_AGE = 0)",
}


def _diagnostics(tallies: dict[str, Tally], variants: list[str]) -> dict[str, Any]:
    base = common.timing_summary(tallies["in_process"].seconds)
    result: dict[str, Any] = {}
    for variant, tally in tallies.items():
        if variant in variants:
            continue
        entry: dict[str, Any] = common.timing_summary(tally.seconds)
        if entry.get("n") and base.get("n") and not variant.startswith("healthz"):
            entry["p50_minus_in_process_p50_ms"] = round(entry["p50_ms"] - base["p50_ms"], 3)
            entry["median_paired_difference_ms"] = paired(tally, tallies["in_process"])
        entry["errors"] = dict(tally.errors)
        entry["what"] = DIAGNOSTICS_NOTE[variant]
        result[variant] = entry
    return result


# ---------------------------------------------------------------------------------------------------------------


class Tally:
    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.errors: Counter[str] = Counter()
        self.result_counts: list[int] = []
        self.wall_s = 0.0
        self.by_item: dict[int, float] = {}
        self.server_cpu_s = 0.0  # at concurrency > 1: the server's CPU while this variant's blocks ran
        self.client_cpu_s = 0.0  # and this process's (the clients', and the in-process calls')

    def add(self, outcome: tuple[float, int, str, int | None], item_index: int | None = None) -> None:
        seconds, status, code, count = outcome
        if status == 200:
            self.seconds.append(seconds)
            if item_index is not None:
                self.by_item[item_index] = seconds
            if count is not None:
                self.result_counts.append(count)
        else:
            self.errors[f"{status} {code}"] += 1


def paired(tally: Tally, base: Tally) -> float | None:
    """The median over items of (this variant's time - the in-process time for the same item), in ms."""
    differences = [seconds - base.by_item[index] for index, seconds in tally.by_item.items() if index in base.by_item]
    return round(common.percentile(differences, 0.5) * 1000, 3) if differences else None


def run(env: common.Env, args: argparse.Namespace) -> tuple[dict[str, Any], LiveServe, list[ClientThread]]:
    import httpx

    from memory.domain.enums import EventOp, Origin, Scope
    from memory.domain.models import ScopeRef
    from memory.models import CatalogEntry, Event
    from memory.services.catalog import ReindexInput, catalog_reindex
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    workspace = str(env.workspace)
    caller = Caller(origin=Origin.CLI, cwd=None)
    resolved = resolve(Selector(workspace=workspace), caller, create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    root = resolved.root(ref)

    # Prefill (not timed).
    common.log(f"prefill: writing {args.memories} memory files to {root}")
    started = time.perf_counter()
    paths = common.write_prose_memories(root, args.memories, common.ProseWords(args.seed), random.Random(args.seed + 2))
    report = catalog_reindex(data=ReindexInput.parse({"workspace": workspace}), caller=caller)
    prefill_s = time.perf_counter() - started
    catalog_rows = CatalogEntry.objects.filter(root_key=ref.root_key, is_system=False).count()
    common.log(f"prefill: {report.files} files, {catalog_rows} catalog rows in {prefill_s:.1f} s")
    if catalog_rows != args.memories:
        raise SystemExit(f"prefill indexed {catalog_rows} memories, wanted {args.memories}")

    vocabulary = common.ProseWords(args.seed)  # the prefill's vocabulary (same seed), fresh stream
    queries = [q.text for q in common.prose_queries(vocabulary, args.requests, args.seed + 1)]
    warm_queries = [q.text for q in common.prose_queries(vocabulary, args.warmup * 2, args.seed + WARMUP_SEED_OFFSET)]
    names = sorted(path.name for path in paths)
    random.Random(args.seed + 3).shuffle(names)
    items = {"search": (queries, warm_queries), "show": (names[:args.requests],
                                                        names[args.requests:args.requests + args.warmup * 2])}

    common.log("starting compozy serve")
    started = time.perf_counter()
    server = start_serve(env.home, env.workspace, env.base / "server.log")
    server_start_s = time.perf_counter() - started
    common.log(f"server up on 127.0.0.1:{server.port} and {server.socket_path} in {server_start_s:.1f} s "
               f"(pids {server.process.pid} {server.children})")
    token = server.token

    def make_clients() -> dict[str, Any]:
        return {
            "tcp": httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"},
                                timeout=HTTP_TIMEOUT_S),
            "uds": httpx.Client(transport=httpx.HTTPTransport(uds=str(server.socket_path)),
                                base_url="http://localhost", timeout=HTTP_TIMEOUT_S),
            "uds_stdlib": StdlibUnixClient(str(server.socket_path)),
        }

    pool = [ClientThread(index, make_clients) for index in range(args.clients)]
    for thread in pool:
        thread.start()
    try:
        return _measure(env, args, server, pool, make_clients, workspace, items, ref, {
            "memories": args.memories, "catalog_rows": catalog_rows, "prefill_s": round(prefill_s, 2),
            "server_start_s": round(server_start_s, 2),
        }, Event, EventOp), server, pool
    except BaseException as exc:
        common.log(f"stopping after {type(exc).__name__}: {exc}")
        for thread in pool:
            thread.stop()
        common.log(f"server stopped (exit code {stop_serve(server)})")
        raise


def _measure(env, args, server, pool, make_clients, workspace, items, ref, setup,  # noqa: ANN001, ANN202, PLR0913
             Event, EventOp):  # noqa: N803
    from django.db.models import Q

    variants = ["tcp", "uds", "in_process"]
    # With several clients the standard library's client runs among the measured variants: the clients share one
    # process (and one GIL), so httpx's per-request CPU queues the others behind it.
    variants_n = [*variants, "uds_stdlib"]
    main_clients = make_clients()
    in_process = InProcess(workspace)
    token = server.token
    diagnostics = not args.no_diagnostics
    recall_ops = Q(op=EventOp.RECALL_EXECUTED.value) | Q(op=EventOp.RECALL_SKIPPED.value)
    server_pids = [server.process.pid, *server.children]
    events_before = Event.objects.filter(recall_ops).count()
    searches_made = 0
    round_trips: dict[str, Any] = {}
    phase_started = time.perf_counter()
    try:
        for verb in ("search", "show"):
            timed_items, warm_items = items[verb]
            round_trips[verb] = {}

            # Concurrency 1: the main thread, item by item, the variant order rotating (the diagnostics too).
            common.log(f"{verb}, 1 client: {args.warmup} warm-up and {len(timed_items)} timed items per variant")
            calls = single_client_calls(verb, workspace, main_clients, in_process, diagnostics, pool[0], token)
            names = list(calls)
            tallies = {variant: Tally() for variant in names}
            serialization: list[float] = []
            for item in warm_items[:args.warmup]:
                for variant in names:
                    calls[variant](item, None)
            for index, item in enumerate(timed_items):
                shift = index % len(names)
                for variant in names[shift:] + names[:shift]:
                    tallies[variant].add(calls[variant](item, serialization), index)
            if verb == "search":
                searches_made += (args.warmup + len(timed_items)) * sum(not v.startswith("healthz") for v in names)
            round_trips[verb]["concurrency_1"] = _block_result({v: tallies[v] for v in variants}, serialization)
            round_trips[verb]["concurrency_1"]["diagnostics"] = _diagnostics(tallies, variants)

            # Concurrency N: persistent threads, in blocks of `block` items per thread per variant.
            clients = len(pool)
            per_thread = len(timed_items) // clients
            rounds = per_thread // args.block
            common.log(f"{verb}, {clients} clients: {rounds} rounds x {clients} threads x {args.block} items "
                       f"per variant")
            tallies = {variant: Tally() for variant in variants_n}
            barrier = threading.Barrier(clients, timeout=JOB_TIMEOUT_S)

            def block(variant: str, chunk: list[list[tuple[int, str]]], tally: Tally | None, *,  # noqa: ANN202
                      verb: str = verb, barrier: threading.Barrier = barrier) -> float:
                def job(thread: ClientThread) -> list[tuple[int, tuple[float, int, str, int | None]]]:
                    mine = chunk[thread.index]
                    barrier.wait()
                    if variant == "in_process":
                        caller_here = InProcess(workspace)
                        return [(index, caller_here.call(verb, item)) for index, item in mine]
                    return [(index, http_call(thread.clients[variant], verb, item, workspace)) for index, item in mine]

                server_cpu, client_cpu = _process_cpu_s(server_pids), _own_cpu_s()
                started = time.perf_counter()
                outcomes = run_on_all(pool, job)
                wall = time.perf_counter() - started
                if tally is not None:
                    for per_thread_outcomes in outcomes:
                        for index, outcome in per_thread_outcomes:
                            tally.add(outcome, index)
                    tally.wall_s += wall
                    tally.server_cpu_s += _process_cpu_s(server_pids) - server_cpu
                    tally.client_cpu_s += _own_cpu_s() - client_cpu
                return wall

            warm_per_thread = max(1, min(args.block, len(warm_items) // clients))
            warm_chunk = [list(enumerate(warm_items[t * warm_per_thread:(t + 1) * warm_per_thread]))
                          for t in range(clients)]
            for variant in variants_n:
                block(variant, warm_chunk, None)
            for round_number in range(rounds):
                # Thread t's items this round: its own slice of the timed items, the same for every variant.
                chunk = [[(index, timed_items[index])
                          for index in range((round_number * clients + t) * args.block,
                                             (round_number * clients + t + 1) * args.block)]
                         for t in range(clients)]
                shift = round_number % len(variants_n)
                for variant in variants_n[shift:] + variants_n[:shift]:
                    block(variant, chunk, tallies[variant])
            if verb == "search":
                searches_made += (sum(map(len, warm_chunk)) + len(timed_items)) * len(variants_n)
            round_trips[verb][f"concurrency_{clients}"] = _block_result(tallies, None)
    finally:
        for client in main_clients.values():
            client.close()
    round_trip_s = time.perf_counter() - phase_started
    recall_events = Event.objects.filter(recall_ops).count() - events_before
    cpu = cpu_per_request(server, workspace, items["show"][0])

    targets: dict[str, Any] = {}
    for concurrency in (1, len(pool)):
        for verb in ("search", "show"):
            measured = round_trips[verb][f"concurrency_{concurrency}"]
            difference = measured["uds"]["p50_minus_in_process_p50_ms"]
            stdlib = measured.get("uds_stdlib") or measured["diagnostics"].get("uds_stdlib", {})
            stdlib_difference = stdlib.get("p50_minus_in_process_p50_ms")
            targets[f"{verb}_concurrency_{concurrency}"] = {
                "uds_p50_minus_in_process_p50_ms": difference,
                "met": difference is not None and difference <= TARGET_UDS_OVER_IN_PROCESS_P50_MS,
                "uds_stdlib_p50_minus_in_process_p50_ms": stdlib_difference,
                "met_with_stdlib_client": stdlib_difference is not None
                and stdlib_difference <= TARGET_UDS_OVER_IN_PROCESS_P50_MS}
            if concurrency > 1:
                targets[f"{verb}_concurrency_{concurrency}"]["in_process_mean_calls_in_flight"] = (
                    measured["in_process"]["mean_calls_in_flight"])

    writes = _writes(env, args, server)
    server_log = server.log.read_text("utf-8", "replace") if server.log.exists() else ""
    return {
        "benchmark": "api",
        "machine": common.machine(),
        "setup": {**setup, "requests_per_variant": args.requests, "warmup_per_variant": args.warmup,
                  "clients": len(pool), "block": args.block, "round_trip_phase_s": round(round_trip_s, 1)},
        "round_trips": round_trips,
        "cpu_per_request_ms": cpu,
        "target_uds_within_2ms_of_in_process_p50": {
            **targets, "met": all(t["met"] for t in targets.values()),
            "met_with_stdlib_client": all(t["met_with_stdlib_client"] for t in targets.values())},
        "writes": writes,
        "checks": {
            "searches_made_all_variants_incl_warmup": searches_made,
            "recall_events_recorded": recall_events,
            "recall_bookkeeping_skipped": searches_made - recall_events,
            "round_trip_errors": _error_total(round_trips),
            "server_log_warnings": sum("skipped" in line or "WARNING" in line or "Traceback" in line
                                       for line in server_log.splitlines()),
            "server_log_tail": server_log.splitlines()[-5:],
        },
    }


def _error_total(round_trips: dict[str, Any]) -> dict[str, int]:
    """Failed round trips of every verb, concurrency and variant (diagnostics included), by status and code."""
    total: Counter[str] = Counter()
    for by_concurrency in round_trips.values():
        for measured in by_concurrency.values():
            for entry in [*measured.values(), *measured.get("diagnostics", {}).values()]:
                if isinstance(entry, dict):
                    total.update(entry.get("errors", {}))
    return dict(total)


def _process_cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of these processes so far, from /proc (Linux)."""
    import os

    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """User plus system CPU seconds of this process so far (all its threads)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_per_request(server: LiveServe, workspace: str, filenames: list[str],
                    count: int = CPU_REQUESTS) -> dict[str, Any]:
    """Where a socket round trip's CPU goes: `count` sequential requests with the standard library's client, the
    server's CPU (all its processes, from /proc) and this process's CPU (the client) per request. /healthz is a
    plain Django view with no database, so it shows what gunicorn, the socket and Django's middleware cost."""
    from urllib.parse import quote

    client = StdlibUnixClient(str(server.socket_path))
    pids = [server.process.pid, *server.children]
    paths = {"healthz": lambda index: "/healthz",
             "show": lambda index: f"/api/memory/{filenames[index % len(filenames)]}?workspace={quote(workspace)}"}
    result: dict[str, Any] = {"requests": count}
    try:
        for name, path in paths.items():
            for index in range(20):
                client.get(path(index))
            server_before, client_before = _process_cpu_s(pids), _own_cpu_s()
            started = time.perf_counter()
            for index in range(count):
                client.get(path(index))
            wall = time.perf_counter() - started
            client_s = _own_cpu_s() - client_before
            result[name] = {"wall": round(wall / count * 1000, 3),
                            "server_cpu": round((_process_cpu_s(pids) - server_before) / count * 1000, 3),
                            "client_cpu": round(client_s / count * 1000, 3)}
    finally:
        client.close()
    return result


def _block_result(tallies: dict[str, Tally], serialization: list[float] | None) -> dict[str, Any]:
    base = common.timing_summary(tallies["in_process"].seconds)
    result: dict[str, Any] = {}
    for variant, tally in tallies.items():
        entry: dict[str, Any] = common.timing_summary(tally.seconds)
        if variant != "in_process" and tally.seconds and base.get("n"):
            entry["p50_minus_in_process_p50_ms"] = round(entry["p50_ms"] - base["p50_ms"], 3)
            entry["p95_minus_in_process_p95_ms"] = round(entry["p95_ms"] - base["p95_ms"], 3)
            entry["median_paired_difference_ms"] = paired(tally, tallies["in_process"])
        elif variant != "in_process":
            entry["p50_minus_in_process_p50_ms"] = None
        if tally.wall_s:
            entry["requests_per_s"] = round(len(tally.seconds) / tally.wall_s, 1)
            # Little's law: the mean number of this variant's calls in flight while its blocks ran.
            entry["mean_calls_in_flight"] = round(sum(tally.seconds) / tally.wall_s, 2)
            calls = max(1, len(tally.seconds))
            entry["cpu_per_call_ms"] = {"server": round(tally.server_cpu_s / calls * 1000, 3),
                                        "this_process": round(tally.client_cpu_s / calls * 1000, 3)}
        if tally.result_counts:
            entry["mean_results"] = round(sum(tally.result_counts) / len(tally.result_counts), 2)
        entry["errors"] = dict(tally.errors)
        result[variant] = entry
    if serialization:
        result["in_process_serialization"] = {**common.timing_summary(serialization),
                                              "what": "result.to_json() + json.dumps, after the call"}
    return result


# ---------------------------------------------------------------------------------------------------------------
# Part 2: concurrent writes over TCP into a second, fresh workspace of the same server.


def _writes(env: common.Env, args: argparse.Namespace, server: LiveServe) -> dict[str, Any]:
    import httpx

    from memory.domain.enums import Origin, Scope
    from memory.domain.models import ScopeRef
    from memory.services.inputs import Caller, Selector
    from memory.services.resolution import resolve

    target = env.base / "writes-project"
    (target / ".git").mkdir(parents=True)
    resolved = resolve(Selector(workspace=str(target)), Caller(origin=Origin.CLI, cwd=None), create_workspace=True)
    ref = ScopeRef(scope=Scope.WORKSPACE, workspace_id=resolved.workspace_id)
    root = resolved.root(ref)
    clients = args.clients
    words = common.Words(args.seed + 7)
    bodies = [[_write_body(common.content(words), str(target)) for _ in range(args.writes_per_client)]
              for _ in range(clients)]
    common.log(f"writes: {clients} clients x {args.writes_per_client} over TCP into {target}")
    barrier = threading.Barrier(clients + 1, timeout=JOB_TIMEOUT_S)
    outcomes: list[list[tuple[float, int, str, str]]] = [[] for _ in range(clients)]
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {server.token}"},
                              timeout=HTTP_TIMEOUT_S) as client:
                client.get("/healthz")  # connect before the start
                barrier.wait()
                for body in bodies[index]:
                    started = time.perf_counter()
                    try:
                        response = client.post("/api/memory", json=body)
                    except httpx.HTTPError as exc:
                        outcomes[index].append((time.perf_counter() - started, 0, f"transport:{type(exc).__name__}",
                                                ""))
                        continue
                    elapsed = time.perf_counter() - started
                    if response.status_code == 200:
                        op = response.json().get("decision", {}).get("op", "")
                        outcomes[index].append((elapsed, 200, "", op))
                    else:
                        outcomes[index].append((elapsed, response.status_code, error_code(response), ""))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(index,), name=f"writer-{index}") for index in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join(timeout=JOB_TIMEOUT_S)
    wall = time.perf_counter() - started
    if failures:
        raise failures[0]
    if any(thread.is_alive() for thread in threads):
        raise RuntimeError("a writer thread did not finish in time")

    flat = [outcome for per_client in outcomes for outcome in per_client]
    ok = [outcome for outcome in flat if outcome[1] == 200]
    errors = Counter(f"{status} {code}" for _seconds, status, code, _op in flat if status != 200)
    ops = Counter(op for _seconds, status, _code, op in flat if status == 200)
    error_latency = [seconds for seconds, status, _code, _op in flat if status != 200]

    files_on_disk = len(list(root.glob("project_*.md")))
    database = sqlite3.connect(f"file:{env.home / 'compozy.db'}?mode=ro", uri=True)
    try:
        applied_adds = database.execute(
            "SELECT COUNT(*) FROM memory_decisions WHERE root_key = ? AND op = 'add' AND applied_at IS NOT NULL",
            [ref.root_key]).fetchone()[0]
        unapplied = database.execute(
            "SELECT COUNT(*) FROM memory_decisions WHERE root_key = ? AND applied_at IS NULL",
            [ref.root_key]).fetchone()[0]
        decisions_by_op = dict(database.execute(
            "SELECT op, COUNT(*) FROM memory_decisions WHERE root_key = ? GROUP BY op", [ref.root_key]).fetchall())
        catalog_rows = database.execute(
            "SELECT COUNT(*) FROM memory_catalog_entries WHERE root_key = ? AND is_system = 0",
            [ref.root_key]).fetchone()[0]
    finally:
        database.close()
    successes = len(ok)
    return {
        "clients": clients,
        "writes_per_client": args.writes_per_client,
        "attempted": len(flat),
        "succeeded_200": successes,
        "ops_of_200s": dict(ops),
        "non_200": sum(errors.values()),
        "non_200_by_status_and_code": dict(errors),
        "non_200_latency": common.timing_summary(error_latency) if error_latency else None,
        "wall_s": round(wall, 2),
        "writes_per_s": round(successes / wall, 1) if wall else None,
        "latency_200": common.timing_summary([outcome[0] for outcome in ok]),
        "latency_200_by_client_p50_max_ms": [
            [round(common.percentile(xs, 0.5) * 1000, 1), round(max(xs) * 1000, 1)] if xs else None
            for xs in ([seconds for seconds, status, _code, _op in per_client if status == 200]
                       for per_client in outcomes)],
        "verification": {
            "files_project_md_in_root": files_on_disk,
            "add_decisions_applied": applied_adds,
            "catalog_rows_in_root": catalog_rows,
            "decisions_by_op": decisions_by_op,
            "decisions_unapplied": unapplied,
            "all_equal_successful_writes": files_on_disk == applied_adds == catalog_rows == successes,
        },
    }


def _write_body(item: common.Content, workspace: str) -> dict[str, str]:
    return {"type": "project", "name": item.name, "description": item.description, "content": item.body,
            "workspace": workspace}


if __name__ == "__main__":
    main()
