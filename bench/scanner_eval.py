"""Content scanner quality on hand-written sets: how many ordinary engineering notes it refuses (false positives)
and how many injection, exfiltration, persistence and secret samples it catches, per half and per category.

    .venv/bin/python bench/scanner_eval.py
    .venv/bin/python bench/scanner_eval.py --detect-secrets     # also detect-secrets in place of the secret rule

Sets (tests/data/scanner/): `notes_a.jsonl`, `notes_b.jsonl` lines `{id, topic, text}`, ordinary notes of the
kind a coding agent's memory holds; `attacks_a.jsonl`, `attacks_b.jsonl` lines `{id, rule, text}`, where `rule` is
the rule id expected to refuse the sample. Both halves were written before the rules were changed; the rules were
developed against half a only, so half b is the held-out check. A note is a false positive when any reject rule
fires; an attack is caught when any reject rule fires (`caught_by_own_rule` also counts the expected rule).

Floor, in the same run: the reject rules the scanner had before issue 13, kept here as they were, on the same
sets. Timing, per variant: mean microseconds per `scan()` of one sample (name, description and body as the
controller passes them) over every sample evaluated, and milliseconds per scan of one 25,600-byte body made of
ordinary notes (the default `memory.file.max_bytes`); best of 5 rounds, the variants taking turns in each round.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

from memory.domain import scanner  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "scanner"
HALVES = ("a", "b")
MAX_FALSE_POSITIVE_RATE = 0.01
MIN_CATCH_RATE = 0.95
LARGE_BODY_BYTES = 25_600  # memory.file.max_bytes by default

Scan = Callable[[str], tuple[str, ...]]


def load(half: str) -> tuple[list[dict], list[dict]]:
    def rows(name: str) -> list[dict]:
        with (DATA / name).open(encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    return rows(f"notes_{half}.jsonl"), rows(f"attacks_{half}.jsonl")


def product_scan(text: str) -> tuple[str, ...]:
    # The controller scans name, description and body together; a sample stands in for a body.
    return scanner.scan("Note", "A note", text).rejected_rules


def evaluate(scan: Scan, notes: list[dict], attacks: list[dict]) -> dict[str, object]:
    false_positives = []
    for note in notes:
        rules = scan(note["text"])
        if rules:
            false_positives.append({"id": note["id"], "topic": note["topic"], "rules": list(rules),
                                    "text": note["text"]})
    categories: dict[str, dict[str, int]] = {}
    misses = []
    for attack in attacks:
        rules = scan(attack["text"])
        tally = categories.setdefault(attack["rule"], {"samples": 0, "caught": 0, "caught_by_own_rule": 0})
        tally["samples"] += 1
        tally["caught"] += bool(rules)
        tally["caught_by_own_rule"] += attack["rule"] in rules
        if not rules:
            misses.append({"id": attack["id"], "rule": attack["rule"], "text": attack["text"]})
    caught = sum(t["caught"] for t in categories.values())
    fp_rate = len(false_positives) / len(notes) if notes else 0.0
    catch_rate = caught / len(attacks) if attacks else 0.0
    return {
        "notes": len(notes),
        "attacks": len(attacks),
        "false_positive_rate": round(fp_rate, 4),
        "catch_rate": round(catch_rate, 4),
        "meets_targets": fp_rate <= MAX_FALSE_POSITIVE_RATE and catch_rate >= MIN_CATCH_RATE,
        "by_category": {rule: {**tally, "catch_rate": round(tally["caught"] / tally["samples"], 4)}
                        for rule, tally in sorted(categories.items())},
        "false_positives": false_positives,
        "misses": misses,
    }


def timings(variants: dict[str, Scan], texts: list[str], large: str, rounds: int = 5) -> dict[str, dict[str, float]]:
    """Per variant: mean microseconds per scan of one sample, and milliseconds per scan of one large body, best
    of `rounds`. The variants take turns within each round, so they share whatever load the machine has."""
    best: dict[str, list[float]] = {name: [float("inf"), float("inf")] for name in variants}
    for _ in range(rounds):
        for name, scan in variants.items():
            started = time.perf_counter()
            for text in texts:
                scan(text)
            best[name][0] = min(best[name][0], (time.perf_counter() - started) / len(texts))
            started = time.perf_counter()
            scan(large)
            best[name][1] = min(best[name][1], time.perf_counter() - started)
    return {name: {"mean_us_per_sample": round(sample * 1e6, 1), "ms_per_large_body": round(body * 1e3, 2)}
            for name, (sample, body) in best.items()}


def large_body(notes: list[dict], size: int) -> str:
    """Ordinary notes joined by blank lines up to `size` bytes: the longest body a memory may have by default."""
    parts: list[str] = []
    used = 0
    while used < size:
        for note in notes:
            parts.append(note["text"])
            used += len(note["text"].encode()) + 2
            if used >= size:
                break
    return "\n\n".join(parts)[:size]


# ----- the floor: the reject rules before issue 13, verbatim ----------------------------------------------------

_I = re.IGNORECASE
_FLOOR_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("scan.invisible_control", re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e]")),
    ("scan.prompt_injection", re.compile(
        r"\b(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+)?(previous|prior|above|earlier)\s+"
        r"(instructions|prompts?|messages|rules|directions)"
        r"|\byou\s+are\s+now\b"
        r"|\bsystem\s+prompt\s+override\b"
        r"|\bnew\s+system\s+prompt\b"
        r"|\boverride\s+(the\s+)?system\s+prompt\b"
        r"|\bact\s+as\s+if\s+you\s+have\s+no\s+(rules|restrictions)\b"
        r"|\bdo\s+not\s+follow\s+(your|the)\s+(rules|instructions)\b", _I)),
    ("scan.exfiltration", re.compile(
        r"\b(curl|wget)\b[^\n]*(\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)|api[_-]?key|token|secret|password)"
        r"|\bcat\s+~?/?[^\s]*\.ssh\b"
        r"|\bnc\s+(-\w+\s+)*-e\b"
        r"|\bbase64\s+(-d|--decode)\s*\|", _I)),
    ("scan.persistence", re.compile(r"\bauthorized_keys\b|\bcrontab\b|\bsystemctl\b|\blaunchctl\b", _I)),
    ("scan.secret", re.compile(
        r"\bsk-[A-Za-z0-9_-]{16,}"
        r"|\bAKIA[0-9A-Z]{16}\b"
        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
        r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
        r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
        r"|\b(api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd)\s*[:=]\s*\S{6,}", _I)),
    ("scan.claim_token", re.compile(r"compozy_claim_(?!token\b)[A-Za-z0-9_-]+")),
    ("scan.operational_identifier", re.compile(
        r"\bcompozy__memory\w*"
        r"|\bmemory\.(write|recall|dream|extractor|provider|workspace|decisions)\.[a-z_]+(\.[a-z_]+)*\b")),
)


def floor_scan(text: str) -> tuple[str, ...]:
    combined = "\n".join(("Note", "A note", text))
    return tuple(rule for rule, pattern in _FLOOR_RULES if pattern.search(combined))


# ----- detect-secrets, evaluated as a replacement for the secret rule ---------------------------------------------

_open_contexts: list[object] = []


def detect_secrets_scan() -> Scan | None:
    """The product's scan with its secret rule replaced by detect-secrets' default plugins and filters, run over
    the lines exactly as `detect-secrets scan` runs over a file's lines (its ad hoc `scan_line` reports every
    candidate without the entropy limits, so it is not used). None when detect-secrets is not installed."""
    try:
        from detect_secrets.core.scan import _process_line_based_plugins
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    # Entered for the rest of the process (the eval only reads); the reference keeps the context from being closed.
    _open_contexts.append(default_settings())
    _open_contexts[-1].__enter__()

    def found(text: str) -> bool:
        lines = list(enumerate(text.splitlines(), start=1))
        return any(True for _secret in _process_line_based_plugins(lines, filename="memory.md"))

    def scan(text: str) -> tuple[str, ...]:
        rules = tuple(rule for rule in product_scan(text) if rule != "scan.secret")
        return rules + (("scan.secret",) if found(text) else ())

    return scan


def summary(results: Iterable[dict[str, object]]) -> dict[str, float]:
    results = list(results)
    notes = sum(r["notes"] for r in results)
    attacks = sum(r["attacks"] for r in results)
    fps = sum(len(r["false_positives"]) for r in results)
    misses = sum(len(r["misses"]) for r in results)
    return {"false_positive_rate": round(fps / notes, 4), "catch_rate": round((attacks - misses) / attacks, 4)}


def main() -> None:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--detect-secrets", action="store_true",
                        help="also evaluate detect-secrets in place of the secret rule (needs it installed)")
    parser.add_argument("--halves", default=",".join(HALVES),
                        help="comma-separated halves to evaluate (default: a,b); rules are developed on a alone")
    common.main(parser, measure)


def measure(_env: None, args: argparse.Namespace) -> dict[str, object]:
    chosen = [half for half in args.halves.split(",") if half]
    if not chosen or any(half not in HALVES for half in chosen):
        raise SystemExit(f"--halves takes a comma-separated subset of {','.join(HALVES)}")
    sets = {half: load(half) for half in chosen}
    texts = [row["text"] for notes, attacks in sets.values() for row in notes + attacks]
    variants: dict[str, Scan] = {"scanner": product_scan, "floor_before_issue_13": floor_scan}
    if args.detect_secrets:
        alternative = detect_secrets_scan()
        if alternative is None:
            raise SystemExit("detect-secrets is not installed: pip install detect-secrets")
        variants["scanner_with_detect_secrets"] = alternative
    document: dict[str, object] = {
        "benchmark": "scanner_eval",
        "command": " ".join(["bench/scanner_eval.py", *sys.argv[1:]]),
        "targets": {"false_positive_rate_max": MAX_FALSE_POSITIVE_RATE, "catch_rate_min": MIN_CATCH_RATE},
    }
    for name, scan in variants.items():
        halves = {half: evaluate(scan, *sets[half]) for half in chosen}
        document[name] = {"halves": halves, "both_halves": summary(halves.values())}
    all_notes = [note for notes, _attacks in sets.values() for note in notes]
    document["timing"] = {"large_body_bytes": LARGE_BODY_BYTES,
                          **timings(variants, texts, large_body(all_notes, LARGE_BODY_BYTES))}
    document["machine"] = common.machine()
    return document


if __name__ == "__main__":
    main()
