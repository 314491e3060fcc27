"""The content scanner meets its quality targets on the hand-written sets (bench/scanner_eval.py, issue 13): at most
1% of ordinary engineering notes refused, at least 95% of injection, exfiltration, persistence and secret samples
caught, on each half. The sets are fixed data and the scanner is deterministic, so this is an exact check."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.bench_scripts import load_bench_script

scanner_eval = load_bench_script("scanner_eval")


def test_the_sets_hold_300_notes_and_100_injection_exfiltration_and_secret_samples():
    notes = [note for half in scanner_eval.HALVES for note in scanner_eval.load(half)[0]]
    attacks = [attack for half in scanner_eval.HALVES for attack in scanner_eval.load(half)[1]]
    kinds = Counter(attack["rule"] for attack in attacks)
    assert len(notes) >= 300
    assert kinds["scan.prompt_injection"] + kinds["scan.exfiltration"] + kinds["scan.secret"] >= 100
    assert len({row["id"] for row in notes + attacks}) == len(notes) + len(attacks)
    assert len({note["text"] for note in notes}) == len(notes)


@pytest.mark.parametrize("half", scanner_eval.HALVES)
def test_the_scanner_meets_its_targets_on_each_half(half):
    result = scanner_eval.evaluate(scanner_eval.product_scan, *scanner_eval.load(half))
    refused = [(row["id"], row["rules"]) for row in result["false_positives"]]
    missed = [row["id"] for row in result["misses"]]
    assert result["false_positive_rate"] <= scanner_eval.MAX_FALSE_POSITIVE_RATE, refused
    assert result["catch_rate"] >= scanner_eval.MIN_CATCH_RATE, missed


def test_the_rules_before_issue_13_missed_the_targets_on_the_same_sets():
    # The floor is what the targets are measured against: if it met them, the sets would not test anything.
    result = scanner_eval.evaluate(scanner_eval.floor_scan, *scanner_eval.load("a"))
    assert result["false_positive_rate"] > scanner_eval.MAX_FALSE_POSITIVE_RATE
    assert result["catch_rate"] < scanner_eval.MIN_CATCH_RATE
