"""Holes 5 and 6: no request makes /api answer a 500 or an HTML page.

- JSON nested 100,000 deep raised RecursionError inside the parser: an HTML 500.
- `memory edit` / PATCH of a hand-placed non-UTF-8 file raised UnicodeDecodeError: a traceback, a 500.
- A request with a Host header outside ALLOWED_HOSTS got Django's HTML 400 and a full traceback in the log.
- The fuzz test sends every /api route malformed, deeply nested, huge, truncated and wrong-typed bodies, query
  strings and path parameters, and checks every answer: never a 500, always the `{code, message, details}` JSON.

These run in-process through Django's full handler (middleware, URL resolver, DRF, the error handlers), with
`raise_request_exception=False` so an unhandled exception shows up as the 500 a client would see.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from django.test import Client
from django.urls import URLPattern

from compozy.home import read_or_create_token
from memory.api import urls as api_urls
from tests import helpers as h
from tests.conftest import Cli
from tests.helpers import workspace_root

pytestmark = pytest.mark.django_db

NOT_UTF8 = ("---\nname: Latin One\ndescription: Saved by an old editor\ntype: project\nscope: workspace\n---\n\n"
            "Caf\xe9 au lait.\n").encode("latin-1")


@pytest.fixture
def client(ws_with_a_memory):
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {read_or_create_token()}")


def assert_error_document(response, status: int | None = None, code: str | None = None) -> dict:
    assert response.status_code != 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), (response.status_code, response.content[:200])
    body = json.loads(response.content)
    assert set(body) == {"code", "message", "details"}, body
    if status is not None:
        assert response.status_code == status, body
    if code is not None:
        assert body["code"] == code, body
    return body


# --- hole 5: the two 500s ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("payload", [b"[" * 100_000, b'{"content": ' * 50_000, b'{"a": [' * 40_000])
def test_deeply_nested_json_is_a_400_validation_error(client, ws_with_a_memory, payload):
    response = client.post("/api/memory", payload, content_type="application/json")
    body = assert_error_document(response, 400, "memory.validation")
    assert body["details"]["reason"] == "json"


def place_non_utf8_file(workspace):
    (workspace_root(workspace) / "project_latin_one.md").write_bytes(NOT_UTF8)


def test_patch_of_a_non_utf8_file_is_a_409_encoding_conflict_and_leaves_the_file(client, ws_with_a_memory, memory_root):
    place_non_utf8_file(ws_with_a_memory)
    response = client.patch(f"/api/memory/project_latin_one.md?workspace={ws_with_a_memory}",
                            json.dumps({"content": "Coffee with milk.", "workspace": str(ws_with_a_memory)}),
                            content_type="application/json")
    body = assert_error_document(response, 409, "memory.conflict")
    assert body["details"]["reason"] == "encoding"
    assert (memory_root / "project_latin_one.md").read_bytes() == NOT_UTF8


def test_cli_edit_of_a_non_utf8_file_is_an_encoding_conflict_not_a_traceback(home, ws_with_a_memory):
    place_non_utf8_file(ws_with_a_memory)
    result = Cli(home=home, cwd=ws_with_a_memory)("memory", "edit", "project_latin_one.md", "--content",
                                                  "Coffee with milk.", "-o", "json")
    assert "Traceback" not in result.stderr
    assert result.code == 4, (result.stdout, result.stderr)
    assert result.json["code"] == "memory.conflict" and result.json["details"]["reason"] == "encoding"


@pytest.mark.parametrize("call", ["show", "edit", "delete"])
def test_every_service_reading_a_non_utf8_file_answers_an_encoding_conflict(ws_with_a_memory, call):
    from memory.domain.errors import Conflict

    place_non_utf8_file(ws_with_a_memory)
    with pytest.raises(Conflict) as error:
        if call == "show":
            h.show(ws_with_a_memory, filename="project_latin_one.md")
        elif call == "edit":
            h.edit(ws_with_a_memory, filename="project_latin_one.md", content="Coffee with milk.")
        else:
            h.delete(ws_with_a_memory, filename="project_latin_one.md")
    assert error.value.details["reason"] == "encoding"


# --- hole 6: Host header refusals ----------------------------------------------------------------------------------

def test_a_foreign_host_header_on_the_api_is_a_json_400_and_one_log_line_without_a_traceback(ws_with_a_memory, caplog):
    client = Client(raise_request_exception=False, HTTP_HOST="attacker.example")
    with caplog.at_level(logging.INFO):
        response = client.get("/api/memory/health")
    body = assert_error_document(response, 400, "memory.validation")
    assert body["details"]["reason"] == "host"
    records = [r for r in caplog.records if r.name.startswith("django.security")]
    assert len(records) == 1, [r.getMessage() for r in caplog.records]
    assert records[0].exc_info is None and records[0].exc_text is None
    assert "attacker.example" in records[0].getMessage()


def test_a_foreign_host_header_logs_one_line_in_a_real_process(home, ws_with_a_memory):
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'compozy.settings'; django.setup(); "
            "from django.test import Client; "
            "r = Client(raise_request_exception=False, HTTP_HOST='attacker.example').get('/api/memory'); "
            "print(r.status_code, r['Content-Type'])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ws_with_a_memory,
                          env=Cli(home=home, cwd=ws_with_a_memory).env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["400", "application/json"], proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "attacker.example" in line]) == 1, proc.stderr


# --- the fuzz test ---------------------------------------------------------------------------------------------------

def api_routes() -> list[tuple[str, list[str]]]:
    """(a concrete path, its methods) for every /api route, its path parameters filled with a plausible value."""
    routes = []
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        view = pattern.callback
        cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
        methods = [m.upper() for m in ("get", "post", "patch", "delete", "put") if hasattr(cls, m)]
        path = "/" + str(pattern.pattern)
        path = path.replace("<str:decision_id>", "dec_000000000000000000000000").replace(
            "<path:filename>", "project_zebra_crossing.md")
        routes.append((path, methods))
    return routes


VALID = {"type": "project", "name": "Fuzzed", "description": "d", "content": "Fuzz body text.", "query": "zebra office"}
WRONG_TYPES = [None, 0, -1, 1.5, 10**30, True, "", "x" * 5000, [], ["a"], {}, {"nested": {"deeper": [1]}}, "\x00",
               "../../etc/passwd", "\u202e", "\x1b[31m"]
FIELDS = ["type", "name", "description", "content", "query", "scope", "agent_name", "agent_tier", "workspace",
          "limit", "cursor", "dry_run", "top_k", "filename", "include_system", "rebuild", "from_scope", "to_scope",
          "operations", "title", "sort", "since"]


def bodies(workspace) -> list[tuple[str, bytes, str]]:
    """(label, body, content type)."""
    valid = json.dumps({**VALID, "workspace": str(workspace)}).encode()
    cases = [
        ("empty", b"", "application/json"),
        ("malformed", b"{not json", "application/json"),
        ("not utf-8", b'{"content": "\xff\xfe"}', "application/json"),
        ("truncated", valid[: len(valid) // 2], "application/json"),
        ("nested arrays", b"[" * 100_000, "application/json"),
        ("nested objects", b'{"a":' * 50_000, "application/json"),
        ("huge", b'{"content": "' + b"x" * (1024 * 1024 + 10) + b'"}', "application/json"),
        ("huge number", b'{"limit": ' + b"9" * 5000 + b"}", "application/json"),
        ("nan", b'{"limit": NaN, "top_k": Infinity}', "application/json"),
        ("duplicate keys", b'{"content": "a", "content": "b"}', "application/json"),
        ("wrong content type", valid, "text/plain"),
        ("form", b"content=x&name=y", "application/x-www-form-urlencoded"),
        ("multipart", b"--b\r\nContent-Disposition: form-data; name=x\r\n\r\ny\r\n--b--\r\n",
         "multipart/form-data; boundary=b"),
        ("valid", valid, "application/json"),
    ]
    for top in (None, [], "text", 5, True):
        cases.append((f"top-level {type(top).__name__}", json.dumps(top).encode(), "application/json"))
    for field in FIELDS:
        for value in WRONG_TYPES:
            body = json.dumps({**VALID, "workspace": str(workspace), field: value}).encode()
            cases.append((f"{field}={value!r:.20}", body, "application/json"))
    return cases


QUERIES = ["", "?limit=abc", "?limit=-5", "?limit=99999999999999999999999", "?cursor=%00%ff", "?workspace=%00",
           "?workspace=/nonexistent/dir", "?scope=galaxy", "?since=yesterday-ish", "?agent_tier=global",
           "?include_system=maybe", "?type=user&type=project", "?" + "x=1&" * 500, "?sort=%27%20OR%201=1",
           "?filename=../../x", "?operation=%E2%80%AE"]
PATHS = ["%00", "..%2f..%2fx", "x" * 5000, "%ff%fe.md", "project_a.md%00.txt", "_system%2fx.md", ".%2e", "%2e%2e",
         "project_%E2%80%AE.md", "a/b/c/d.md"]


def test_fuzz_no_api_route_answers_a_500_or_html(client, ws_with_a_memory):
    checked = 0
    failures: list[str] = []

    def check(method: str, path: str, response, label: str) -> None:
        nonlocal checked
        checked += 1
        content_type = response.get("Content-Type", "")
        # /api/schema answers its OpenAPI document (YAML by default); everything else is JSON.
        expected = ("application/json", "application/vnd.oai.openapi") if path.startswith("/api/schema") \
            else ("application/json",)
        if response.status_code >= 500 or not content_type.startswith(expected):
            failures.append(f"{method} {path[:80]} [{label}] -> {response.status_code} {content_type} "
                            f"{response.content[:120]!r}")

    routes = api_routes()
    cases = bodies(ws_with_a_memory)
    for path, methods in routes:
        for method in methods:
            if method == "GET" or method == "DELETE":
                for query in QUERIES:
                    check(method, path + query, client.generic(method, path + query), "query")
            else:
                for label, payload, content_type in cases:
                    response = client.generic(method, f"{path}?workspace={ws_with_a_memory}", payload,
                                              content_type=content_type)
                    check(method, path, response, label)
        for method in ("PUT", "OPTIONS", "HEAD", "TRACE"):
            check(method, path, client.generic(method, path), "method")
    for prefix in ("/api/memory/", "/api/memory/decisions/", "/api/memory/decisions/x/revert/"):
        for fragment in PATHS:
            for method in ("GET", "PATCH", "DELETE", "POST"):
                check(method, prefix + fragment, client.generic(method, prefix + fragment, b"{}",
                                                                content_type="application/json"), "path")
    for path in ("/api", "/api/", "/api/nope", "/api/memory/search/extra/segments", "/api/%ff"):
        check("GET", path, client.get(path), "unknown route")
    assert checked > 2000, checked  # the fuzz really ran over every route
    assert failures == [], f"{len(failures)} of {checked} answers were a 500 or not JSON:\n" + "\n".join(failures[:40])
