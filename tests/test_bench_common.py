"""Pure parts of bench/common.py that the benchmarks' printed figures rely on."""

from __future__ import annotations

import os

from tests.bench_scripts import load_bench_script


def test_the_disk_flush_probe_fsyncs_each_write_and_leaves_nothing_behind(tmp_path, monkeypatch):
    common = load_bench_script("common")
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(common.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    probe = common.disk_flush_probe(tmp_path, count=20)
    assert len(synced) == 20  # one flush per write, each timed
    assert probe["n"] == 20
    assert 0 <= probe["p50_ms"] <= probe["p95_ms"] <= probe["max_ms"]
    assert list(tmp_path.iterdir()) == []
