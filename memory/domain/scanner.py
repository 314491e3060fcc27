"""The deterministic content scanner. It runs on every candidate, batch and checkpoint.

Findings name rule ids only: the offending text is never echoed into a reason, event or log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.domain.text import CONTROL_CHARACTERS, has_structural_tag

_I = re.IGNORECASE

# (rule id, pattern). Patterns are deliberately specific: a false positive blocks a legitimate memory.
REJECT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("scan.invisible_control", re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e]")),
    # Control characters other than newline and tab act on terminals (ESC, BEL, CR) or truncate (NUL).
    ("scan.control_character", CONTROL_CHARACTERS),
    (
        "scan.prompt_injection",
        re.compile(
            r"\b(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier)\s+"
            r"(instructions|prompts?|messages|rules|directions)"
            r"|\byou\s+are\s+now\b"
            r"|\bsystem\s+prompt\s+override\b"
            r"|\bnew\s+system\s+prompt\b"
            r"|\boverride\s+(the\s+)?system\s+prompt\b"
            r"|\bact\s+as\s+if\s+you\s+have\s+no\s+(rules|restrictions)\b"
            r"|\bdo\s+not\s+follow\s+(your|the)\s+(rules|instructions)\b",
            _I,
        ),
    ),
    (
        "scan.exfiltration",
        re.compile(
            r"\b(curl|wget)\b[^\n]*(\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)|api[_-]?key|token|secret|password)"
            r"|\bcat\s+~?/?[^\s]*\.ssh\b"
            r"|\bnc\s+(-\w+\s+)*-e\b"
            r"|\bbase64\s+(-d|--decode)\s*\|",
            _I,
        ),
    ),
    ("scan.persistence", re.compile(r"\bauthorized_keys\b|\bcrontab\b|\bsystemctl\b|\blaunchctl\b", _I)),
    (
        "scan.secret",
        re.compile(
            r"\bsk-[A-Za-z0-9_-]{16,}"
            r"|\bAKIA[0-9A-Z]{16}\b"
            r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
            r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
            r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
            r"|\b(api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd)\s*[:=]\s*\S{6,}",
            _I,
        ),
    ),
    # The literal placeholder `compozy_claim_token` is allowed; any other claim token is live material.
    ("scan.claim_token", re.compile(r"compozy_claim_(?!token\b)[A-Za-z0-9_-]+")),
    (
        "scan.operational_identifier",
        re.compile(
            r"\bcompozy__memory\w*"
            r"|\bmemory\.(write|recall|dream|extractor|provider|workspace|decisions)\.[a-z_]+(\.[a-z_]+)*\b"
        ),
    ),
)

ANNOTATE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "scan.relative_date",
        re.compile(r"\b(today|yesterday|tomorrow|this\s+(week|month|morning|afternoon)|last\s+(week|night|month)|right\s+now)\b", _I),
    ),
)


@dataclass(frozen=True)
class ScanResult:
    rejected_rules: tuple[str, ...] = ()
    annotations: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not self.rejected_rules


# Rules that are not one pattern. A `<compozy_…>` tag in memory text could close the snapshot section it sits in;
# the assemblers escape it too (memory.domain.text.escape_structural_tags), this refuses it on write.
CHECK_RULES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("scan.structural_tag", has_structural_tag),
)


def scan(*texts: str) -> ScanResult:
    combined = "\n".join(texts)
    rejected = tuple(rule_id for rule_id, pattern in REJECT_RULES if pattern.search(combined))
    rejected += tuple(rule_id for rule_id, check in CHECK_RULES if check(combined))
    notes = tuple(rule_id for rule_id, pattern in ANNOTATE_RULES if pattern.search(combined))
    return ScanResult(rejected_rules=rejected, annotations=notes)
