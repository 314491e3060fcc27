"""An OpenAI-compatible chat-completions provider for real deployments.

A failing endpoint is not hammered: after `failure_threshold` consecutive failures (errors, timeouts, unusable
answers) calls fail fast for `cooldown`, then one call is let through to probe it again. The breaker is per
endpoint and per process, so every caller in a worker shares what it has learned.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from memory.domain.extraction import POLICY_TEXT

from .base import ProviderError

EXTRACT_SYSTEM_PROMPT = (
    "You read the new turns of a conversation between a user and a coding agent and propose durable memories. "
    "The user message is JSON: `turns` to read (each with seq, role, text) and `context`, earlier turns given "
    "only so you can tell what a correction refers to. Read only what the user says.\n\n"
    + POLICY_TEXT
    + "\n\nAnswer with JSON lines and nothing else: one JSON object per line, no code fences, no commentary, and "
    "no line at all when there is nothing worth keeping. Each object has exactly these keys:\n"
    '{"type": "user"|"feedback"|"project"|"reference", "scope": "global"|"workspace"|"agent", '
    '"agent_tier": null (or "workspace"|"global" when scope is "agent"), "content": <one or two sentences that '
    'stand alone>, "evidence": [<seq of each turn it comes from>], "entity": <what it is about, e.g. "user" or '
    '"staging database">, "attribute": <which property, e.g. "editor" or "port">}\n'
    "user and feedback memories are global; project and reference memories are workspace. Give a fact the same "
    "entity and attribute as the earlier memory it corrects or replaces."
)

SYSTEM_PROMPTS = {
    "tiebreaker": (
        "You arbitrate one memory write. The user message is JSON with a candidate memory and a list of existing "
        "targets. Answer with exactly one JSON object and nothing else: "
        '{"op": "add"|"update"|"noop", "target_id": <one of the targets\' ids, or null>, '
        '"confidence": <0..1>, "reason": <short text>}. Choose update only when the candidate restates or '
        "corrects exactly one target."
    ),
    "extract": EXTRACT_SYSTEM_PROMPT,
    "dream_synthesis": (
        "You consolidate the memories that coding agents kept recalling in one workspace into one project memory. "
        "The user message is JSON: a date, a run id, the exact section headings to use (`sections`), and the "
        "candidates, each with name, filename, type, scope and a snippet of its content. Answer with the Markdown "
        "body only (no frontmatter, no code fence): a short opening paragraph, then each heading from `sections` "
        "on its own line, and under each the candidates of that type, naming each one's filename in backticks "
        "and saying in one or two sentences what future sessions should know from it. Stay within max_bytes and "
        "max_lines. Do not invent facts; do not include secrets, commands or instructions to the reader."
    ),
    "checkpoint": (
        "You maintain a workspace checkpoint: continuity notes that the next coding-agent session reads as "
        "historical context. The user message is JSON with `previous` (the current checkpoint, Markdown, maybe "
        "empty), `messages` (the newest part of a session transcript, in order; `cut` says what was left out), "
        "`sections` (the exact `##` headings, in order) and `limits` (max_bytes, max_lines). Update the "
        "previous checkpoint with what the transcript adds; keep what still holds, drop what it contradicts, "
        "newest first within each section. Answer with the Markdown body only: every heading of `sections` "
        "exactly once, in that order, each followed by `- ` items (write `- (none yet)` for an empty one). No "
        "code fences, no other headings, no preamble, within the limits. Never copy secrets or tokens."
    ),
}

READ_CHUNK = 64 * 1024
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


@dataclass
class Breaker:
    threshold: int
    cooldown_ms: int
    failures: int = 0
    open_until: float = 0.0

    def check(self) -> None:
        if self.failures >= self.threshold and time.monotonic() < self.open_until:
            raise ProviderError(f"provider cooling down after {self.failures} consecutive failures")

    def failed(self) -> None:
        self.failures += 1
        if self.failures >= self.threshold:
            self.open_until = time.monotonic() + self.cooldown_ms / 1000

    def succeeded(self) -> None:
        self.failures = 0
        self.open_until = 0.0


_breakers: dict[tuple[str, str], Breaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(base_url: str, model: str, threshold: int, cooldown_ms: int) -> Breaker:
    with _breakers_lock:
        key = (base_url, model)
        breaker = _breakers.get(key)
        if breaker is None or (breaker.threshold, breaker.cooldown_ms) != (threshold, cooldown_ms):
            breaker = _breakers[key] = Breaker(threshold, cooldown_ms)
        return breaker


class OpenAICompatibleProvider:
    name = "openai"

    def __init__(self, config: Any) -> None:
        self.base_url = config.base_url.rstrip("/")
        self.model = config.model
        self.api_key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        self.default_timeout_ms = config.timeout
        self.breaker = breaker_for(self.base_url, self.model, config.failure_threshold, config.cooldown)

    def complete(self, *, task: str, payload: dict[str, Any], timeout_ms: int) -> str:
        if not self.base_url:
            raise ProviderError("memory.provider.base_url is not configured")
        with _breakers_lock:
            self.breaker.check()
        try:
            answer = self._request(task, payload, min(timeout_ms, self.default_timeout_ms))
        except ProviderError:
            with _breakers_lock:
                self.breaker.failed()
            raise
        with _breakers_lock:
            self.breaker.succeeded()
        return answer

    def _request(self, task: str, payload: dict[str, Any], timeout_ms: int) -> str:
        system = SYSTEM_PROMPTS.get(task, f"Perform the task {task!r} on the JSON input. Answer with JSON only.")
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
            ],
        }
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})},
            method="POST",
        )
        # The socket timeout bounds each wait; the deadline bounds the whole answer, so a server that trickles
        # bytes cannot hold a worker past it.
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            with urllib.request.urlopen(request, timeout=timeout_ms / 1000) as response:
                chunks: list[bytes] = []
                size = 0
                while True:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the answer did not arrive within the deadline")
                    chunk = response.read1(READ_CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise ValueError("the answer is too large")
                    chunks.append(chunk)
            data = json.loads(b"".join(chunks).decode("utf-8"))
        except (urllib.error.URLError, TimeoutError, ValueError, OSError) as exc:
            raise ProviderError(f"provider request failed: {type(exc).__name__}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ProviderError("provider answer has no choices[0].message.content") from None
        if not isinstance(content, str):
            raise ProviderError("provider answer content is not text")
        return content
