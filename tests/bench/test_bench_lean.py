"""The lean load generator (``okapi bench --load lean``) end to end: a real 2 DC x 2-partition cluster,
the installed command, results.json checked. Its throughput is the benchmark's business; here: every
operation answered, both partitions served, the run recorded as lean, one load process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.errors import BenchError
from okapikv.bench.engine.lean import BATCH_OPERATIONS, LeanLoad
from okapikv.bench.engine.workloads import SCAN, Operation, OperationSource


@pytest.mark.timeout(300)
def test_lean_load_drives_every_partition_and_records_its_runs(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "okapikv.cli", "bench", "--workload", "a", "--load", "lean", "--partitions", "2",
         "--dcs", "east,west", "--wan", "off", "--clients", "32", "--quick", "--no-progress", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )
    log = completed.stdout + completed.stderr
    assert completed.returncode == 0, log
    results = json.loads((tmp_path / "results.json").read_text())
    runs = [run for series in results["series"].values() for run in series["runs"]]
    assert len(runs) == 1, log
    [run] = runs
    assert run["load"] == "lean" and run["processes"] == 1 and run["partitions"] == 2 and run["clients"] == 32
    assert run["dcs"] == 2
    assert run["operations"] > 0 and run["errors"] == {}, run
    assert run["latency_us"]["read"]["count"] > 0 and run["latency_us"]["update"]["count"] > 0
    assert run["server_operations"]["get"] > 0 and run["server_operations"]["swap"] > 0
    assert " lean" in log  # the run's label says which load generator measured it


class _Scans(OperationSource):
    def next(self) -> Operation:
        return Operation(SCAN, b"a", end=b"z", limit=10)


def test_lean_load_refuses_operations_it_cannot_send() -> None:
    load = LeanLoad(TargetSpec("lean", ("127.0.0.1:1",)), [_Scans()], max_operations=10)
    with pytest.raises(BenchError, match="GET, SWAP and PUT only"):
        load._encode(_Scans().next())
    assert BATCH_OPERATIONS == 8  # the async client's batch on the native port
