"""The OpenAI-compatible provider doing extraction, against a real HTTP server on 127.0.0.1 that answers good
JSON lines, garbage, partial lines, slow answers and errors. Each run goes through the real `extract_turns`:
prompt, strict parsing, policy, staging and dead letters on disk."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compozy.config import load_config
from memory.controller import inbox
from memory.domain.extraction import POLICY_TEXT, FailureRecord, StagedCandidate, Turn
from memory.providers.base import get_provider
from memory.sessions.extraction import SessionSource, extract_turns

SOURCE = SessionSource("sess-http", "sess-root", "01HXJ9YR4Q0000000000000000")
TURNS = [Turn(1, "user", "My editor is helix."), Turn(2, "assistant", "Noted."),
         Turn(3, "user", "<compozy_recall>We use pnpm for package management.</compozy_recall> Our CI runs nightly.")]
LINE = {"type": "user", "scope": "global", "agent_tier": None, "content": "My editor is helix.", "evidence": [1],
        "entity": "user", "attribute": "editor"}


class FakeCompletions:
    """A chat-completions endpoint on loopback whose next answer the test sets."""

    def __init__(self) -> None:
        self.content = ""
        self.raw: bytes | None = None  # a body sent as is, instead of a completion wrapping `content`
        self.status = 200
        self.delay = 0.0
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                fake.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                time.sleep(fake.delay)
                body = fake.raw if fake.raw is not None else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": fake.content}}]}).encode()
                try:
                    self.send_response(fake.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting, as it should

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeCompletions()
    yield server
    server.close()


def config_for(fake: FakeCompletions, home: Path, **extra: str):
    return load_config(environ={"COMPOZY_HOME": str(home), "COMPOZY_MEMORY__PROVIDER__KIND": "'openai'",
                                "COMPOZY_MEMORY__PROVIDER__BASE_URL": f"'{fake.url}'",
                                "COMPOZY_MEMORY__PROVIDER__MODEL": "'m'", **extra})


def run(config):
    return extract_turns(source=SOURCE, turns=TURNS, context=[], config=config)


def staged(home: Path, outcome) -> list[StagedCandidate]:
    text = (home / "memory" / outcome.staged_file).read_text()
    return [StagedCandidate.model_validate_json(line) for line in text.splitlines()]


def failure(home: Path, name: str) -> FailureRecord:
    return inbox.read_failure(home / "memory", name)


def test_the_prompt_carries_the_policy_and_the_turns_without_injected_blocks(fake, home):
    fake.content = json.dumps(LINE) + "\n"
    outcome = run(config_for(fake, home))
    assert outcome.status == "completed" and outcome.candidate_count == 1
    system, user = fake.requests[0]["messages"]
    assert POLICY_TEXT in system["content"] and "JSON lines" in system["content"]
    sent = json.loads(user["content"])
    assert [t["seq"] for t in sent["turns"]] == [1, 2, 3]
    assert "pnpm" not in user["content"] and "Our CI runs nightly." in user["content"]
    [line] = staged(home, outcome)
    assert (line.source.session, line.source.root_session, line.source.from_seq, line.source.until_seq) == \
        ("sess-http", "sess-root", 1, 3)
    assert line.memory.content == "My editor is helix."


def test_a_garbage_answer_stages_nothing_and_becomes_a_validate_dead_letter(fake, home):
    fake.content = "Sure! Here are the memories:\n- the user likes helix"
    outcome = run(config_for(fake, home))
    assert outcome.status == "failed" and outcome.candidate_count == 0 and outcome.staged_file == ""
    [name] = outcome.failures
    record = failure(home, name)
    assert record.stage == "validate" and "not JSON" in record.error
    assert record.content == fake.content
    assert (record.source.session, record.source.from_seq, record.source.until_seq) == ("sess-http", 1, 3)
    assert not (home / "memory" / "_inbox").exists()


def test_a_partial_last_line_is_a_dead_letter_and_the_complete_lines_are_staged(fake, home):
    second = {**LINE, "content": "Our CI runs nightly.", "evidence": [3], "type": "project", "scope": "workspace",
              "entity": "project", "attribute": "ci"}
    fake.content = json.dumps(LINE) + "\n" + json.dumps(second) + "\n" + json.dumps(LINE)[:40]
    outcome = run(config_for(fake, home))
    assert outcome.status == "completed" and outcome.candidate_count == 2
    assert [line.memory.attribute for line in staged(home, outcome)] == ["editor", "ci"]
    [name] = outcome.failures
    assert failure(home, name).content == json.dumps(LINE)[:40]


def test_lines_breaking_the_policy_are_dropped_and_counted(fake, home):
    secret = {**LINE, "content": "The deploy token is sk-THISISASECRETVALUE1234567890."}
    fake.content = json.dumps(LINE) + "\n" + json.dumps(secret)
    outcome = run(config_for(fake, home))
    assert outcome.candidate_count == 1 and outcome.counters["filtered"] == 1
    assert "sk-THIS" not in (home / "memory" / outcome.staged_file).read_text()


def test_a_slow_answer_times_out_into_a_provider_dead_letter(fake, home):
    fake.content, fake.delay = json.dumps(LINE), 1.0
    outcome = run(config_for(fake, home, COMPOZY_MEMORY__PROVIDER__TIMEOUT="'200ms'"))
    assert outcome.status == "failed" and outcome.staged_file == ""
    [name] = outcome.failures
    record = failure(home, name)
    assert record.stage == "provider" and "Timeout" in record.error


@pytest.mark.parametrize(("raw", "status"), [(b"<html>bad gateway</html>", 502), (b"not json", 200),
                                             (b'{"choices": []}', 200)],
                         ids=["server-error", "body-not-json", "no-choices"])
def test_an_unusable_http_answer_is_a_provider_dead_letter(fake, home, raw, status):
    fake.raw, fake.status = raw, status
    outcome = run(config_for(fake, home))
    assert outcome.status == "failed"
    assert failure(home, outcome.failures[0]).stage == "provider"


def test_after_the_failure_threshold_calls_fail_fast_until_the_cooldown_passes(fake, home):
    fake.raw, fake.status = b"oops", 500
    config = config_for(fake, home, COMPOZY_MEMORY__PROVIDER__FAILURE_THRESHOLD="2",
                        COMPOZY_MEMORY__PROVIDER__COOLDOWN="'300ms'")
    for _ in range(2):
        run(config)
    assert len(fake.requests) == 2
    cooling = run(config)
    assert "cooling down" in cooling.error and len(fake.requests) == 2  # the endpoint was left alone
    time.sleep(0.35)
    fake.raw, fake.status, fake.content = None, 200, json.dumps(LINE)
    probe = run(config)
    assert probe.status == "completed" and len(fake.requests) == 3
    fake.raw, fake.status = b"oops", 500
    run(config)
    assert len(fake.requests) == 4  # a success reset the count: one failure does not open the breaker again
    assert get_provider(config).breaker.failures == 1
