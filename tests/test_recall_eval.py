"""The recall harness reads data sets whose turn ids are numbers as well as strings (bench/recall_eval.py)."""

from __future__ import annotations

import json

from tests.bench_scripts import BENCH, load_bench_script


def _recall_eval():
    return load_bench_script("recall_eval")


def test_numeric_turn_ids_match_their_numeric_evidence_and_name_a_valid_file(tmp_path):
    recall_eval = _recall_eval()
    (tmp_path / "turns.jsonl").write_text("\n".join(json.dumps(row) for row in [
        {"conv": 3, "turn": 7, "role": "Dana", "text": "the bucket", "time": "9:05 am on 4 March, 2024", "session": 1},
        {"conv": 3, "turn": "D1:2", "role": "Ann", "text": "a reply", "time": "9:05 am on 4 March, 2024"},
    ]) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps(
        {"conv": 3, "question": "which bucket?", "evidence": [7, "D1:2"], "category": "code"}) + "\n")
    turns, questions = recall_eval.load(tmp_path, None)
    assert [row["turn"] for row in turns["3"]] == ["7", "D1:2"]
    assert questions["3"][0]["evidence"] == ["7", "D1:2"]
    assert recall_eval.first_hit(["D1:2", "7"], questions["3"][0]["evidence"]) == 0
    filename = recall_eval.document(turns["3"][0])[0]
    assert filename == "project_turn_7.md"


def test_the_technical_check_is_in_the_harness_format_with_numeric_ids():
    recall_eval = _recall_eval()
    turns, questions = recall_eval.load(BENCH / "data" / "recall-tech", None)
    ids = {row["turn"] for rows in turns.values() for row in rows}
    asked = [q for qs in questions.values() for q in qs]
    assert len(ids) >= 40 and len(asked) >= 60
    assert all(evidence in ids for q in asked for evidence in q["evidence"])
    assert min(len(row["text"].encode()) for rows in turns.values() for row in rows) > 600
