"""Dead letters as the extractor's drain leaves them, for the tests of replaying them on every surface."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memory.domain.extraction import ExtractedMemory, FailureSource, RunSource, StagedCandidate
from memory.extractor import inbox


def dead_letter(root, session: str, minute: int, *, stage: str = "submit", content: str | None = None,
                attribute: str = "editor", text: str = "My editor is helix.") -> str:
    """A dead letter of `session` recorded at 12:<minute>, whose content is one staged candidate line (or
    `content`): what the drain leaves when a file's submit failed (a busy database, say)."""
    line = StagedCandidate(source=RunSource(session=session, root_session=session, from_seq=1, until_seq=3),
                           memory=ExtractedMemory(type="user", scope="global", agent_tier=None, content=text,
                                                  evidence=[3], entity="user", attribute=attribute)).line()
    return inbox.record_failure(root, stage=stage, error="boom", content=line + "\n" if content is None else content,
                                source=FailureSource(session=session, root_session=session, from_seq=1, until_seq=3),
                                name_hint=f"{session}-{minute}.jsonl",
                                now=datetime(2026, 1, 2, 12, minute, tzinfo=UTC))


def seed_dead_letters(home: Path) -> list[str]:
    """Two dead letters of session par-x, the same in every home: a submit that failed (its candidate replays)
    and a provider failure whose turns are not in the ledger (it cannot be replayed)."""
    source = {"session": "par-x", "root_session": "par-x", "from_seq": 1, "until_seq": 3}
    line = StagedCandidate(source=RunSource(**source), memory=ExtractedMemory(
        type="user", scope="global", agent_tier=None, content="My pager is pagerduty.", evidence=[3],
        entity="user", attribute="pager")).line()
    return [inbox.record_failure(home / "memory", stage=stage, source=FailureSource(**source), error="seeded",
                                 content=content, name_hint=f"par-x-{minute}.jsonl",
                                 now=datetime(2026, 1, 2, 12, minute, tzinfo=UTC))
            for stage, content, minute in (("submit", line + "\n", 1), ("provider", "", 2))]
