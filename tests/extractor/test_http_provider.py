"""The OpenAI-compatible provider doing extraction, against a real HTTP server on 127.0.0.1 that answers good
JSON lines, garbage, partial lines, slow answers and errors. Each run goes through the real `extract_turns`:
prompt, strict parsing, policy, staging and dead letters on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from compozy.config import load_config
from memory.domain.extraction import POLICY_TEXT, FailureRecord, StagedCandidate, Turn
from memory.extractor import inbox
from memory.extractor.extraction import SessionSource, extract_turns
from memory.providers import get_provider
from tests.fake_completions import FakeCompletions

SOURCE = SessionSource("sess-http", "sess-root", "01HXJ9YR4Q0000000000000000")
TURNS = [Turn(1, "user", "My editor is helix."), Turn(2, "assistant", "Noted."),
         Turn(3, "user", "<compozy_recall>We use pnpm for package management.</compozy_recall> Our CI runs nightly.")]
LINE = {"type": "user", "scope": "global", "agent_tier": None, "content": "My editor is helix.", "evidence": [1],
        "entity": "user", "attribute": "editor"}


def config_for(completions: FakeCompletions, home: Path, **extra: str):
    return load_config(environ={"COMPOZY_HOME": str(home), "COMPOZY_MEMORY__PROVIDER__KIND": "'openai'",
                                "COMPOZY_MEMORY__PROVIDER__BASE_URL": f"'{completions.url}'",
                                "COMPOZY_MEMORY__PROVIDER__MODEL": "'m'", **extra})


def run(config):
    return extract_turns(source=SOURCE, turns=TURNS, context=[], config=config)


def staged(home: Path, outcome) -> list[StagedCandidate]:
    text = (home / "memory" / outcome.staged_file).read_text()
    return [StagedCandidate.model_validate_json(line) for line in text.splitlines()]


def failure(home: Path, name: str) -> FailureRecord:
    return inbox.read_failure(home / "memory", name)


def test_the_prompt_carries_the_policy_and_the_turns_without_injected_blocks(completions, home):
    completions.reply = json.dumps(LINE) + "\n"
    outcome = run(config_for(completions, home))
    assert outcome.status == "completed" and outcome.candidate_count == 1
    system, user = completions.requests[0]["body"]["messages"]
    assert POLICY_TEXT in system["content"] and "JSON lines" in system["content"]
    sent = json.loads(user["content"])
    assert [t["seq"] for t in sent["turns"]] == [1, 2, 3]
    assert "pnpm" not in user["content"] and "Our CI runs nightly." in user["content"]
    [line] = staged(home, outcome)
    assert (line.source.session, line.source.root_session, line.source.from_seq, line.source.until_seq) == \
        ("sess-http", "sess-root", 1, 3)
    assert line.memory.content == "My editor is helix."


def test_a_garbage_answer_stages_nothing_and_becomes_a_validate_dead_letter(completions, home):
    completions.reply = "Sure! Here are the memories:\n- the user likes helix"
    outcome = run(config_for(completions, home))
    assert outcome.status == "failed" and outcome.candidate_count == 0 and outcome.staged_file == ""
    [name] = outcome.failures
    record = failure(home, name)
    assert record.stage == "validate" and "not JSON" in record.error
    assert record.content == completions.reply
    assert (record.source.session, record.source.from_seq, record.source.until_seq) == ("sess-http", 1, 3)
    assert not (home / "memory" / "_inbox").exists()


def test_a_partial_last_line_is_a_dead_letter_and_the_complete_lines_are_staged(completions, home):
    second = {**LINE, "content": "Our CI runs nightly.", "evidence": [3], "type": "project", "scope": "workspace",
              "entity": "project", "attribute": "ci"}
    completions.reply = json.dumps(LINE) + "\n" + json.dumps(second) + "\n" + json.dumps(LINE)[:40]
    outcome = run(config_for(completions, home))
    assert outcome.status == "completed" and outcome.candidate_count == 2
    assert [line.memory.attribute for line in staged(home, outcome)] == ["editor", "ci"]
    [name] = outcome.failures
    assert failure(home, name).content == json.dumps(LINE)[:40]


def test_lines_breaking_the_policy_are_dropped_and_counted(completions, home):
    secret = {**LINE, "content": "The deploy token is sk-THISISASECRETVALUE1234567890."}
    completions.reply = json.dumps(LINE) + "\n" + json.dumps(secret)
    outcome = run(config_for(completions, home))
    assert outcome.candidate_count == 1 and outcome.counters["filtered"] == 1
    assert "sk-THIS" not in (home / "memory" / outcome.staged_file).read_text()


def test_a_slow_answer_times_out_into_a_provider_dead_letter(completions, home):
    completions.reply, completions.delay = json.dumps(LINE), 1.0
    outcome = run(config_for(completions, home, COMPOZY_MEMORY__PROVIDER__TIMEOUT="'200ms'"))
    assert outcome.status == "failed" and outcome.staged_file == ""
    [name] = outcome.failures
    record = failure(home, name)
    assert record.stage == "provider" and "Timeout" in record.error


@pytest.mark.parametrize(("raw", "status"), [(b"<html>bad gateway</html>", 502), (b"not json", 200),
                                             (b'{"choices": []}', 200)],
                         ids=["server-error", "body-not-json", "no-choices"])
def test_an_unusable_http_answer_is_a_provider_dead_letter(completions, home, raw, status):
    completions.raw, completions.status = raw, status
    outcome = run(config_for(completions, home))
    assert outcome.status == "failed"
    assert failure(home, outcome.failures[0]).stage == "provider"


def test_after_the_failure_threshold_calls_fail_fast_until_the_cooldown_passes(completions, home):
    completions.raw, completions.status = b"oops", 500
    config = config_for(completions, home, COMPOZY_MEMORY__PROVIDER__FAILURE_THRESHOLD="2",
                        COMPOZY_MEMORY__PROVIDER__COOLDOWN="'300ms'")
    for _ in range(2):
        run(config)
    assert len(completions.requests) == 2
    cooling = run(config)
    assert "cooling down" in cooling.error and len(completions.requests) == 2  # the endpoint was left alone
    time.sleep(0.35)
    completions.raw, completions.status, completions.reply = None, 200, json.dumps(LINE)
    probe = run(config)
    assert probe.status == "completed" and len(completions.requests) == 3
    completions.raw, completions.status = b"oops", 500
    run(config)
    assert len(completions.requests) == 4  # a success reset the count: one failure does not open the breaker again
    assert get_provider(config).breaker.failures == 1
