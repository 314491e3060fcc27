"""An OpenAI-compatible chat-completions provider for real deployments."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from .base import ProviderError

SYSTEM_PROMPTS = {
    "tiebreaker": (
        "You arbitrate one memory write. The user message is JSON with a candidate memory and a list of existing "
        "targets. Answer with exactly one JSON object and nothing else: "
        '{"op": "add"|"update"|"noop", "target_id": <one of the targets\' ids, or null>, '
        '"confidence": <0..1>, "reason": <short text>}. Choose update only when the candidate restates or '
        "corrects exactly one target."
    ),
}


class OpenAICompatibleProvider:
    name = "openai"

    def __init__(self, config: Any) -> None:
        self.base_url = config.base_url.rstrip("/")
        self.model = config.model
        self.api_key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        self.default_timeout_ms = config.timeout

    def complete(self, *, task: str, payload: dict[str, Any], timeout_ms: int) -> str:
        if not self.base_url:
            raise ProviderError("memory.provider.base_url is not configured")
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
            headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=min(timeout_ms, self.default_timeout_ms) / 1000) as response:
                data = json.loads(response.read().decode("utf-8"))
        except (urllib.error.URLError, TimeoutError, ValueError, OSError) as exc:
            raise ProviderError(f"provider request failed: {type(exc).__name__}") from None
        try:
            return data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ProviderError("provider answer has no choices[0].message.content") from None
