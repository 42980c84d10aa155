"""`okapi bench --workload memory` end to end at a small size: a real `okapi server` process, keys
loaded through the client, RSS read from /proc. Only the fields are checked, not the figures (they
depend on the machine; the README reports the 1M-key measurement)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RECORDS = 20_000


@pytest.mark.timeout(300)
def test_memory_workload_reports_rss_per_key(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "okapikv.cli", "bench", "--workload", "memory", "--records", str(RECORDS),
         "--key-bytes", "8", "--value-bytes", "8", "--out", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, timeout=240,
    )
    log = completed.stdout + completed.stderr
    assert completed.returncode == 0, log[-4000:]
    results = json.loads((tmp_path / "results.json").read_text())
    (row,) = results["memory"]
    assert row["system"] == "okapi" and row["keys"] == RECORDS and row["versions"] == RECORDS
    assert (row["records"], row["key_bytes"], row["value_bytes"]) == (RECORDS, 8, 8)
    assert 0 < row["rss_before_bytes"] <= row["rss_peak_bytes"] and 0 < row["rss_after_bytes"] <= row["rss_peak_bytes"]
    assert row["bytes_per_key"] == pytest.approx((row["rss_after_bytes"] - row["rss_before_bytes"]) / RECORDS, abs=0.1)
    assert row["rss_after_per_key"] == pytest.approx(row["rss_after_bytes"] / RECORDS, abs=0.1)
    assert row["load_s"] > 0 and row["load_ops_s"] > 0
    assert "memory.csv" in results["files"]["csv"]
    assert (tmp_path / "memory.csv").read_text().startswith("system,records,key_bytes,value_bytes,keys,versions")
    report = (tmp_path / "report.md").read_text()
    assert "## Memory per key" in report and f"| okapi | {RECORDS:,} | 8/8 |" in report
    assert "B/key loaded" in log
