"""Hole 8: non-Latin names, decision ids with slashes, over-long session headers, and the schema over TCP."""

from __future__ import annotations

import json
import socket

import pytest
from django.test import Client

from compozy.home import read_or_create_token
from memory.domain.enums import MemoryType
from memory.domain.names import memory_filename, slugify, validate_filename
from tests import helpers as h

# --- names in any script make valid, deterministic slugs -------------------------------------------------------------

NON_LATIN = [
    ("数据库迁移", "shujukuqianyi"),
    ("東京の天気", "dongjingnotianqi"),
    ("データベース", "detabesu"),
    ("한국어 메모", "hangugeo_memo"),
    ("Привет мир", "privet_mir"),
    ("Ελληνικά", "ellinika"),
    ("हिन्दी", "hindi"),
    ("Café au lait", "cafe_au_lait"),
    ("北京 Office", "beijing_office"),
]


@pytest.mark.parametrize(("name", "slug"), NON_LATIN)
def test_a_name_in_any_script_is_transliterated_into_a_valid_slug(name, slug):
    assert slugify(name) == slug
    filename = memory_filename(MemoryType.PROJECT, name)
    assert validate_filename(filename) == filename  # within [a-z0-9_.-], as clarifications.md requires


def test_the_same_name_always_gives_the_same_slug_and_ascii_names_are_unchanged():
    assert {slugify("数据库迁移") for _ in range(3)} == {"shujukuqianyi"}
    assert slugify("Review Style") == "review_style"


@pytest.mark.django_db
def test_a_memory_named_in_cjk_is_written_and_a_second_write_of_the_same_name_updates_it(home, workspace_dir):
    first = h.write(workspace_dir, name="数据库迁移", description="迁移步骤", content="先备份，再迁移。")
    assert first["decision"]["op"] == "add"
    assert first["decision"]["target_filename"] == "project_shujukuqianyi.md"
    second = h.write(workspace_dir, name="数据库迁移", description="迁移步骤", content="先备份，再迁移，最后验证。")
    assert second["decision"]["op"] == "update"
    assert second["decision"]["target_filename"] == "project_shujukuqianyi.md"
    shown = h.show(workspace_dir, filename="project_shujukuqianyi.md")
    assert shown["memory"]["summary"]["name"] == "数据库迁移"  # the name itself keeps its script


# --- the HTTP surface --------------------------------------------------------------------------------------------

@pytest.fixture
def client(home, workspace_dir):
    h.write(workspace_dir, name="Zebra Crossing", content="The zebra crossing is near the office.")
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {read_or_create_token()}")


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
@pytest.mark.parametrize("suffix", ["..%2f..%2fx", "a%2fb", "../../project_zebra_crossing.md", "x/revert/y"])
def test_a_decision_path_with_slashes_is_answered_by_the_decision_routes_not_the_memory_item(client, method,
                                                                                               suffix):
    response = client.generic(method.upper(), f"/api/memory/decisions/{suffix}", b"{}",
                              content_type="application/json")
    body = json.loads(response.content)
    assert response.status_code in (400, 405), body
    if response.status_code == 400:
        assert body["code"] == "memory.validation" and body["details"]["field"] == "decision_id", body
    assert body["details"].get("field") != "filename"


@pytest.mark.django_db
def test_a_malformed_decision_id_is_a_validation_error_and_a_well_formed_unknown_one_is_not_found(client):
    bad = client.get("/api/memory/decisions/not-a-decision")
    assert bad.status_code == 400 and json.loads(bad.content)["details"]["field"] == "decision_id"
    unknown = client.get("/api/memory/decisions/dec_" + "0" * 24)
    assert unknown.status_code == 404 and json.loads(unknown.content)["code"] == "memory.not_found"


@pytest.mark.django_db
def test_an_over_long_session_header_is_refused_and_writes_nothing(client, workspace_dir):
    from memory.models import Decision

    before = Decision.objects.count()
    response = client.post("/api/memory", json.dumps({"type": "project", "name": "Long Session", "description": "d",
                                                      "content": "Written under a huge session id.",
                                                      "workspace": str(workspace_dir)}),
                           content_type="application/json", HTTP_X_COMPOZY_SESSION="s" * 5000)
    body = json.loads(response.content)
    assert response.status_code == 400 and body["code"] == "memory.validation", body
    assert body["details"] == {"field": "session_id", "reason": "too_long", "max_length": 128}
    assert Decision.objects.count() == before
    ok = client.post("/api/memory", json.dumps({"type": "project", "name": "Short Session", "description": "d",
                                                "content": "Written under a normal session id.",
                                                "workspace": str(workspace_dir)}),
                     content_type="application/json", HTTP_X_COMPOZY_SESSION="s" * 128)
    assert ok.status_code == 200, ok.content


@pytest.mark.django_db
def test_a_session_id_with_control_characters_is_refused(client):
    response = client.get("/api/memory/health", HTTP_X_COMPOZY_SESSION="abc\x1b[31m")
    assert response.status_code == 400
    assert json.loads(response.content)["details"]["reason"] == "control_character"


@pytest.mark.django_db
def test_the_schema_needs_the_token_over_tcp_and_is_open_over_the_socket(home):
    assert Client().get("/api/schema").status_code == 401
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/api/schema").status_code == 401
    token = read_or_create_token()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/schema", {"format": "json"}).status_code == 200
    with socket.socket(socket.AF_UNIX) as unix:
        over_socket = Client().get("/api/schema", {"format": "json"}, **{"gunicorn.socket": unix})
    assert over_socket.status_code == 200
    assert "/api/memory" in json.loads(over_socket.content)["paths"]
