"""What the catalog's tests share: a long memory whose sections become separate chunks."""

from __future__ import annotations

SECTIONS = ["Backups", "Restores", "Retention", "Alerts", "Drills"]


def long_body(topic: str = "backup") -> str:
    return "".join(f"## {section}\n\n" + " ".join(f"{topic}{section.lower()}{n}" for n in range(80)) + "\n\n"
                   for section in SECTIONS)
