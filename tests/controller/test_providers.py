"""The tiebreaker through both providers: the deterministic local default and an OpenAI-compatible endpoint,
the latter against a real HTTP server on loopback."""

from __future__ import annotations

import json

import pytest

from compozy.config import load_config
from memory.controller.core import rule_settings
from memory.controller.rules import decide
from memory.domain.enums import Op
from memory.providers.base import ProviderError
from memory.providers.openai_http import OpenAICompatibleProvider
from tests import helpers as h
from tests.controller.helpers import AMBIGUOUS, candidate


def settings_for(completions, tmp_path, **extra):
    environ = {"COMPOZY_HOME": str(tmp_path), "COMPOZY_MEMORY__PROVIDER__KIND": "'openai'",
               "COMPOZY_MEMORY__PROVIDER__BASE_URL": f"'{completions.url}'", "COMPOZY_MEMORY__PROVIDER__MODEL": "'m'",
               "OPENAI_API_KEY": "test-key", **extra}
    import os

    old = dict(os.environ)
    os.environ.update(environ)
    try:
        return rule_settings(load_config(environ=environ))
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_the_http_provider_sends_a_chat_completion_and_its_answer_decides(completions, tmp_path):
    completions.reply = json.dumps({"op": "update", "target_id": "project_a.md", "confidence": 0.8, "reason": "same"})
    verdict = decide(candidate(), AMBIGUOUS, settings_for(completions, tmp_path))
    assert (verdict.op, verdict.target_filename, verdict.source.value) == (Op.UPDATE, "project_a.md", "llm")
    request = completions.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer test-key"
    sent = json.loads(request["body"]["messages"][1]["content"])
    assert sorted(t["id"] for t in sent["targets"]) == ["project_a.md", "project_b.md"]


@pytest.mark.parametrize(
    ("reply", "status", "delay", "expected"),
    [
        ("not json at all", 200, 0.0, "invalid_json"),
        (json.dumps({"op": "update", "target_id": "project_made_up.md", "confidence": 1, "reason": "x"}), 200, 0.0,
         "invented_target"),
        ("{}", 500, 0.0, "error"),
        (json.dumps({"op": "add", "target_id": None, "confidence": 1, "reason": "x"}), 200, 0.6, "error"),
    ],
    ids=["invalid-json", "invented-target", "server-error", "too-slow"],
)
def test_http_provider_failures_fall_back_to_the_default_op(completions, tmp_path, reply, status, delay, expected):
    completions.reply, completions.status, completions.delay = reply, status, delay
    settings = settings_for(completions, tmp_path, COMPOZY_MEMORY__CONTROLLER__MAX_LATENCY="'200ms'",
                            COMPOZY_MEMORY__CONTROLLER__DEFAULT_OP_ON_FAIL="'reject'")
    verdict = decide(candidate(), AMBIGUOUS, settings)
    assert verdict.op is Op.REJECT
    assert verdict.llm_trace["status"] in (expected, "timeout")


def test_an_unconfigured_http_provider_raises_a_provider_error(tmp_path):
    config = load_config(environ={"COMPOZY_HOME": str(tmp_path), "COMPOZY_MEMORY__PROVIDER__KIND": "'openai'"})
    with pytest.raises(ProviderError):
        OpenAICompatibleProvider(config.memory.provider).complete(task="tiebreaker", payload={}, timeout_ms=100)


@pytest.mark.django_db
def test_hybrid_mode_with_the_local_provider_updates_a_near_duplicate_and_adds_a_distinct_memory(home, workspace_dir):
    h.write(workspace_dir, name="Release Train", content="Releases ship every tuesday from the main branch.")
    h.write(workspace_dir, name="Hotfix Path", content="Hotfixes ship from release branches on tuesday.")
    near = h.write(workspace_dir, name="Shipping Day",
                   content="Releases ship every tuesday from the main branch always.")
    assert near["decision"]["op"] == "update"
    assert near["decision"]["source"] == "llm"
    assert near["decision"]["target_filename"] == "project_release_train.md"
    distinct = h.write(workspace_dir, name="Branch Names",
                       content="Release branches are named after tuesday dates and ship quickly.")
    assert distinct["decision"]["op"] == "add"
    assert distinct["decision"]["llm_trace"]["status"] == "ok"


@pytest.mark.django_db
def test_rules_mode_noops_the_same_ambiguous_write(home, workspace_dir, monkeypatch):
    monkeypatch.setenv("COMPOZY_MEMORY__CONTROLLER__MODE", "rules")
    h.write(workspace_dir, name="Release Train", content="Releases ship every tuesday from the main branch.")
    h.write(workspace_dir, name="Hotfix Path", content="Hotfixes ship from release branches on tuesday.")
    result = h.write(workspace_dir, name="Branch Names",
                     content="Release branches are named after tuesday dates and ship quickly.")
    assert result["decision"]["op"] == "noop"
    assert result["decision"]["llm_trace"] is None
