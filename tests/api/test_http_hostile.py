"""Hostile input on the wire, against a live `compozy serve`: lone surrogates in JSON bodies, requests gunicorn
refuses itself, chunked bodies, session ids from a header, and values of the wrong JSON type. Every refusal is
the `{code, message, details}` JSON document with a 4xx status, and nothing is written."""

from __future__ import annotations

import json
import socket
import sqlite3

import pytest

from tests.helpers import workspace_root


def files(server) -> list[str]:
    return sorted(str(p.relative_to(server.workspace)) for p in server.workspace.rglob("*.md")
                  if p.name != "MEMORY.md")


def decisions(server) -> list[tuple]:
    with sqlite3.connect(server.home / "compozy.db") as db:
        return db.execute("SELECT id, session_id FROM memory_decisions ORDER BY seq").fetchall()


def write_body(server, name: str, content: str, **extra) -> dict:
    return {"type": "project", "name": name, "description": f"About {name}", "content": content,
            "workspace": str(server.workspace), **extra}


def raw(server, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are over TCP and read the whole answer (gunicorn closes after an error)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            headers = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:] if ": " in line)
            if "Content-Length" in headers and len(body) >= int(headers["Content-Length"]):
                break
    status = int(head.split(b" ", 2)[1])
    return status, headers, body


def assert_error_document(body: bytes | str, code: str = "memory.validation") -> dict:
    document = json.loads(body)
    assert set(document) == {"code", "message", "details"}, document
    assert document["code"] == code, document
    return document


SURROGATE_BODIES = [
    ("content", "POST", "/api/memory",
     b'{"type": "project", "name": "Lone", "description": "d", "content": "half an emoji \\ud83d here"}'),
    ("workspace", "POST", "/api/memory",
     b'{"type": "project", "name": "Lone", "description": "d", "content": "c", "workspace": "\\udc00"}'),
    ("name", "POST", "/api/memory", b'{"type": "project", "name": "\\ud800", "description": "d", "content": "c"}'),
    ("key", "POST", "/api/memory", b'{"\\ud800": 1, "type": "project", "name": "X", "description": "d", '
                                   b'"content": "c"}'),
    ("patch", "PATCH", "/api/memory/project_seed.md", b'{"content": "edited \\udfff"}'),
    ("search", "POST", "/api/memory/search", b'{"query": "\\ud800"}'),
    ("batch", "POST", "/api/memory/ad-hoc", b'{"title": "T", "content": "\\ud800"}'),
]


@pytest.fixture(scope="module")
def seeded(server):
    with server.uds() as client:
        response = client.post("/api/memory", json=write_body(server, "Seed", "The seed fact."))
    assert response.status_code == 200, response.text
    return server


@pytest.mark.parametrize(("label", "method", "path", "content"), SURROGATE_BODIES,
                         ids=[case[0] for case in SURROGATE_BODIES])
def test_a_lone_surrogate_in_a_json_body_is_a_400_with_a_stable_code_never_a_500(seeded, label, method, path,
                                                                                  content):
    server = seeded
    before = (files(server), decisions(server))
    with server.tcp() as client:
        response = client.request(method, path, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    document = assert_error_document(response.content)
    assert document["details"]["reason"] == "encoding"
    response.content.decode("utf-8")  # the error document itself is valid UTF-8
    assert (files(server), decisions(server)) == before


def test_gunicorns_own_refusals_are_json_error_documents(server):
    status, headers, body = raw(server, b"GET /api/memory?q=" + b"x" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert status == 414 and headers["Content-Type"] == "application/json"
    assert assert_error_document(body)["details"]["reason"] == "uri_too_long"

    many = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    status, headers, body = raw(server, b"GET /api/memory HTTP/1.1\r\nHost: localhost\r\n" + many + b"\r\n")
    assert status == 431 and headers["Content-Type"] == "application/json"
    assert assert_error_document(body)["details"]["reason"] == "headers_too_large"

    status, headers, body = raw(server, b"GET /api/memory HTTP/1.1\r\nHost: localhost\r\nX-Big: "
                                + b"y" * 9000 + b"\r\n\r\n")
    assert status == 431 and assert_error_document(body)["details"]["reason"] == "headers_too_large"

    status, headers, body = raw(server, b"NOT A REQUEST LINE\r\n\r\n")
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert assert_error_document(body)["details"]["reason"] == "bad_request"


def chunked(server, payload: bytes, path: str = "/api/memory") -> tuple[int, dict[str, str], bytes]:
    pieces = [payload[i:i + 4096] for i in range(0, len(payload), 4096)]
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    head = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {server.token}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    return raw(server, head.encode() + body)


def test_a_chunked_request_body_is_read_and_bounded_by_the_same_limit(server):
    payload = json.dumps(write_body(server, "Chunked", "A fact sent in zqchunked chunks.")).encode()
    status, _headers, body = chunked(server, payload)
    assert status == 200, body
    assert json.loads(body)["decision"]["target_filename"] == "project_chunked.md"
    assert (workspace_root(server.workspace) / "project_chunked.md").is_file()

    before = (files(server), decisions(server))
    huge = json.dumps(write_body(server, "Huge", "x" * (1024 * 1024 + 10))).encode()
    status, _headers, body = chunked(server, huge)
    assert status == 413 and assert_error_document(body)["details"]["reason"] == "too_large"
    assert (files(server), decisions(server)) == before


@pytest.mark.parametrize("session", ["../../x", "<script>alert(1)</script>", "a/b", "x" * 129, ".hidden",
                                     "tab\there"])
def test_a_session_id_from_the_header_is_validated_before_anything_stores_it(server, session):
    before = (files(server), decisions(server))
    with server.tcp() as client:
        response = client.post("/api/memory", json=write_body(server, "Headed", "A zqheaded fact."),
                               headers={"X-Compozy-Session": session})
    assert response.status_code == 400, response.text
    document = assert_error_document(response.content)
    assert document["details"]["field"] == "session_id"
    assert (files(server), decisions(server)) == before


def test_a_valid_session_id_from_the_header_is_recorded(server):
    with server.tcp() as client:
        response = client.post("/api/memory", json=write_body(server, "Sessioned", "A zqsessioned fact."),
                               headers={"X-Compozy-Session": "claude:session-1.2_x@host"})
    assert response.status_code == 200, response.text
    assert decisions(server)[-1][1] == "claude:session-1.2_x@host"


@pytest.mark.parametrize(("field", "value"), [("dry_run", "yes"), ("dry_run", 1), ("content", 5),
                                              ("name", True), ("create_workspace", "on")])
def test_a_body_value_of_another_json_type_is_refused_not_coerced(server, field, value):
    before = (files(server), decisions(server))
    with server.tcp() as client:
        response = client.post("/api/memory", json={**write_body(server, "Typed", "A zqtyped fact."), field: value})
    assert response.status_code == 400, response.text
    document = assert_error_document(response.content)
    assert document["details"]["field"] == field and document["details"]["reason"] == "type"
    assert (files(server), decisions(server)) == before


def test_query_strings_still_carry_numbers_and_booleans_as_text(seeded):
    with seeded.tcp() as client:
        response = client.get("/api/memory", params={"limit": "1", "detail": "true",
                                                     "workspace": str(seeded.workspace)})
        refused = client.get("/api/memory", params={"limit": "true"})
    assert response.status_code == 200, response.text
    assert len(response.json()["memories"]) == 1
    assert refused.status_code == 400 and assert_error_document(refused.content)["details"]["reason"] == "type"
