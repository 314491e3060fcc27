"""The default provider: deterministic, offline, no model. Same input, same output, always."""

from __future__ import annotations

import json
from typing import Any

from memory.domain import checkpoint
from memory.domain.extraction import ExtractedMemory, Turn, extracted_scope
from memory.domain.text import overlap_words

from .base import ProviderError
from .extract_rules import extract

# A candidate whose words mostly coincide with one target's is a restatement of it.
NEAR_DUPLICATE_JACCARD = 0.6


def _jaccard(left: set[str], right: set[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


class LocalProvider:
    name = "local"

    def complete(self, *, task: str, payload: dict[str, Any], timeout_ms: int) -> str:
        handler = getattr(self, f"_task_{task}", None)
        if handler is None:
            raise ProviderError(f"the local provider has no task {task!r}")
        return handler(payload)

    def _task_tiebreaker(self, payload: dict[str, Any]) -> str:
        candidate = payload["candidate"]
        # Bodies carry the fact; names and descriptions legitimately differ between restatements of it.
        words = overlap_words(candidate["body"])
        scored = sorted(
            ((_jaccard(words, overlap_words(t["body"])), t["id"]) for t in payload["targets"]),
            key=lambda pair: (-pair[0], pair[1]),
        )
        best_score, best_id = scored[0] if scored else (0.0, None)
        runner_up = scored[1][0] if len(scored) > 1 else 0.0
        if best_id is not None and best_score >= NEAR_DUPLICATE_JACCARD and best_score > runner_up:
            answer = {
                "op": "update",
                "target_id": best_id,
                "confidence": round(best_score, 4),
                "reason": f"near duplicate of one target (word jaccard {best_score:.2f})",
            }
        else:
            answer = {
                "op": "add",
                "target_id": None,
                "confidence": round(1.0 - best_score, 4),
                "reason": f"no single near-duplicate target (best word jaccard {best_score:.2f})",
            }
        return json.dumps(answer)

    def _task_extract(self, payload: dict[str, Any]) -> str:
        # The same JSON lines a model would answer, so they go through the same strict parser.
        turns = [Turn(**turn) for turn in payload["turns"]]
        context = [Turn(**turn) for turn in payload.get("context", [])]
        lines = [
            ExtractedMemory(type=p.type, scope=extracted_scope(p.type, p.content), agent_tier=None, content=p.content,
                            evidence=list(p.evidence), entity=p.entity, attribute=p.attribute).line()
            for p in extract(turns, context=context)
        ]
        return "\n".join(lines)

    def _task_dream_synthesis(self, payload: dict[str, Any]) -> str:
        """The templated body of a dreaming synthesis: a short preamble, then one section per memory type (in the
        payload's order) listing each candidate's name, file, scope and snippet, best scored first."""
        candidates = payload["candidates"]
        lines = [
            f"Memories that agents in this workspace kept recalling, consolidated by dreaming on {payload['date']} "
            f"(run {payload['run_id']}): {len(candidates)} memories, grouped by type. Each entry names the memory, "
            "its file and the start of its content; the files hold the full text.",
        ]
        for heading in payload["sections"]:
            group = [c for c in candidates if heading == f"## {c['type'].capitalize()} memories"]
            lines += ["", heading, ""]
            lines += [f"- **{c['name']}** (`{c['filename']}`, {c['scope']}): {c['snippet']}" for c in group]
        return "\n".join(lines)

    def _task_checkpoint(self, payload: dict[str, Any]) -> str:
        """The workspace checkpoint by rules, no model: this projection's goal, decisions, completed work, pending
        asks, files and critical context, merged over the previous checkpoint section by section."""
        limits = payload["limits"]
        return checkpoint.build(payload["messages"], payload.get("previous") or "",
                                max_bytes=int(limits["max_bytes"]), max_lines=int(limits["max_lines"]),
                                workspace=(payload.get("session") or {}).get("workspace_dirs") or ())
