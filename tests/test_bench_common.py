"""The shared `main()` and summaries of bench/common.py, which every benchmark's printed document goes through."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench_script

common = load_bench_script("common")


def bench_parser():
    parser = common.parser("a bench")
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--worker", type=int)
    return parser


def test_a_bench_main_prints_what_it_measured_with_the_machine_block(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench", "--n", "3"])
    common.main(bench_parser(), lambda env, args: {"benchmark": "t", "home": env, "n": args.n})
    document = json.loads(capsys.readouterr().out)
    assert document["benchmark"] == "t" and document["n"] == 3
    assert document["home"] is None  # no home asked for: the bench builds its own
    assert {"date", "python", "sqlite", "cpus", "git", "embedder", "load_average"} <= set(document["machine"])
    assert len(document["machine"]["load_average"]) == 3


def test_a_bench_main_hands_a_worker_run_to_the_worker_and_measures_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench", "--worker", "100"])
    workers: list[int] = []
    common.main(bench_parser(), lambda env, args: pytest.fail("measured in a worker run"),
                worker=lambda args: workers.append(args.worker))
    assert workers == [100]
    assert capsys.readouterr().out == ""


def test_a_bench_main_exits_with_the_status_its_document_asks_for(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench"])
    with pytest.raises(SystemExit) as exited:
        common.main(bench_parser(), lambda env, args: {"errors": 2}, exit_code=lambda document: 1)
    assert exited.value.code == 1
    assert json.loads(capsys.readouterr().out)["errors"] == 2  # printed before it exits


def test_a_latency_summary_names_its_rate_for_what_it_counts():
    summary = common.latency_summary([0.1, 0.1, 0.2, 0.2], counting="searches")
    assert summary["searches_per_s"] == 6.7
    assert "writes_per_s" not in summary
    assert summary["p50_ms"] == 150.0 and summary["max_ms"] == 200.0


def test_a_bench_that_builds_its_own_home_leaves_no_temp_dir_unless_asked_to_keep_it():
    seen = []
    document = common.in_own_temp_dir("t", False, lambda base: seen.append(base) or {"ran": base.is_dir()})
    assert document == {"ran": True} and not seen[0].exists()

    def fails(base):
        seen.append(base)
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError):
        common.in_own_temp_dir("t", False, fails)
    assert not seen[1].exists()  # removed when the run fails too
    kept = common.in_own_temp_dir("t", True, lambda base: {"ran": True})
    try:
        assert Path(kept["kept"]).is_dir()
    finally:
        shutil.rmtree(kept["kept"])
