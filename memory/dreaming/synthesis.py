"""The synthesis: one `project` memory, "Dreaming synthesis <date>", consolidating a run's candidates.

The active provider writes its body from a payload of the candidates (name, file, type, scope, a bounded
snippet). Whatever provider wrote it, the body is validated the same way: size (`memory.file` limits), one section
per candidate type (`## Project memories`, ...), every candidate's file named, and the content scanner's rules.
The local provider's template always passes; a remote provider's prose that fails (or a provider error) is
replaced by the local template, and the run records why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compozy.config import Config
from memory.domain.enums import MemoryType
from memory.domain.scanner import scan
from memory.providers import get_provider
from memory.providers.base import ProviderError
from memory.providers.local import LocalProvider

TASK = "dream_synthesis"
TYPE_ORDER = [t.value for t in MemoryType]
WITHHELD = "(snippet withheld: the content scanner flagged it)"


def section_heading(memory_type: str) -> str:
    return f"## {memory_type.capitalize()} memories"


def synthesis_name(date: str) -> str:
    return f"Dreaming synthesis {date}"


def synthesis_description(date: str, count: int) -> str:
    return f"What agents in this workspace kept recalling, consolidated on {date} from {count} memories"


def bounded_snippet(body: str, limit: int) -> str:
    """The body on one line, cut at a word boundary to at most `limit` characters; flagged text is withheld."""
    text = " ".join(body.split())
    if len(text) > limit:
        cut = text[: limit - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"
    return text if scan(text).clean else WITHHELD


def safe_name(name: str, filename: str) -> str:
    return name if scan(name).clean else filename


@dataclass
class Synthesis:
    name: str
    description: str
    body: str
    # Which provider wrote the body, and what happened to a remote provider's answer.
    provider: str
    status: str = "ok"
    reason: str = ""
    fallback: bool = False
    sections: list[str] = field(default_factory=list)

    def trace(self) -> dict[str, Any]:
        return {"provider": self.provider, "status": self.status, "reason": self.reason, "fallback": self.fallback,
                "sections": self.sections, "bytes": len(self.body.encode("utf-8"))}


def payload(*, date: str, run_id: str, candidates: list[dict[str, Any]], config: Config) -> dict[str, Any]:
    present = {c["type"] for c in candidates}
    return {
        "date": date,
        "run_id": run_id,
        "sections": [section_heading(t) for t in TYPE_ORDER if t in present],
        "candidates": [{"name": c["name"], "filename": c["filename"], "type": c["type"],
                        "scope": c["scope"] if not c.get("agent_name") else f"agent {c['agent_name']}",
                        "snippet": c["snippet"], "score": c["score"]} for c in candidates],
        "max_bytes": config.memory.file.max_bytes,
        "max_lines": config.memory.file.max_lines,
    }


def problems(body: str, data: dict[str, Any], name: str, description: str) -> list[str]:
    """Why a body is not an acceptable synthesis (empty when it is)."""
    found = []
    if not body.strip():
        return ["empty"]
    if len(body.encode("utf-8")) > data["max_bytes"]:
        found.append(f"size: over {data['max_bytes']} bytes")
    if body.count("\n") + 1 > data["max_lines"]:
        found.append(f"size: over {data['max_lines']} lines")
    lines = {line.strip() for line in body.splitlines()}
    missing = [heading for heading in data["sections"] if heading not in lines]
    if missing:
        found.append("sections: missing " + ", ".join(missing))
    unnamed = [c["filename"] for c in data["candidates"] if c["filename"] not in body]
    if unnamed:
        found.append(f"sections: {len(unnamed)} candidate file(s) not named")
    result = scan(name, description, body)
    if not result.clean:
        found.append("scanner: " + ",".join(result.rejected_rules))
    return found


def _strip_fence(text: str) -> str:
    """Models often wrap Markdown in one code fence; the body is what is inside it."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        inner = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return inner.rsplit("```", 1)[0].strip()
    return stripped


def synthesize(*, date: str, run_id: str, candidates: list[dict[str, Any]], config: Config) -> Synthesis:
    data = payload(date=date, run_id=run_id, candidates=candidates, config=config)
    name, description = synthesis_name(date), synthesis_description(date, len(candidates))
    provider = get_provider(config)
    timeout = config.memory.provider.timeout
    if provider.name != LocalProvider.name:
        try:
            body = _strip_fence(provider.complete(task=TASK, payload=data, timeout_ms=timeout))
            wrong = problems(body, data, name, description)
            if not wrong:
                return Synthesis(name, description, body, provider.name, sections=data["sections"])
            status, reason = "invalid", "; ".join(wrong)
        except ProviderError as exc:
            status, reason = "error", str(exc)
        local = LocalProvider().complete(task=TASK, payload=data, timeout_ms=timeout)
        return Synthesis(name, description, local, provider.name, status, reason, fallback=True,
                         sections=data["sections"])
    body = provider.complete(task=TASK, payload=data, timeout_ms=timeout)
    wrong = problems(body, data, name, description)
    if wrong:
        # The template is ours: a failure here is a bug, and the run fails rather than writing it.
        raise ValueError("the local synthesis template failed its own validation: " + "; ".join(wrong))
    return Synthesis(name, description, body, provider.name, sections=data["sections"])
