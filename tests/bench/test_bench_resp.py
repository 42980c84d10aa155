"""``okapi bench --suite resp --quick``: redis-benchmark against okapikv's RESP port and against a
redis-server started by the bench, side by side, with the ratio for each (C, P) in the report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.suites.resp import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def test_the_resp_suite_measures_both_systems_at_every_point(tmp_path: Path) -> None:
    out = tmp_path / "out"
    completed = subprocess.run([sys.executable, "-m", "okapikv.cli", "bench", "--suite", "resp", "--quick", "--out",
                                str(out), "--no-progress"], capture_output=True, text=True, timeout=540)
    log = completed.stdout + completed.stderr
    assert completed.returncode == 0, log
    results = json.loads((out / "results.json").read_text())
    rows = results["resp"]
    assert [(row["clients"], row["pipeline"]) for row in rows] == [(1, 1), (1, 16), (50, 1), (50, 16)], log
    for row in rows:
        assert row["command"] == f"redis-benchmark -t set,get,incr -n 10000 -c {row['clients']} -P {row['pipeline']}"
        for test in ("set", "get", "incr"):
            figures = row[test]
            assert figures["okapi_ops_s"] > 0 and figures["redis_ops_s"] > 0
            assert figures["ratio"] == round(figures["okapi_ops_s"] / figures["redis_ops_s"], 4)
    report = (out / "report.md").read_text()
    assert "## redis-benchmark: okapikv's RESP port against redis-server" in report
    assert "| `redis-benchmark -t set,get,incr -n 10000 -c 50 -P 16` | INCR |" in report
    with (out / "resp.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 12
