"""``scripts/resp_cluster_bench.py``, whose per-second figures judge the RESP port's "no second below
half the mean" (docs/benchmarks.md, "The Redis protocol on 2 DCs x 2 partitions"): redis-benchmark's
progress lines become per-second rates of the right test, with the servers' CPU and run-queue waits
read for each second and their Stats counters taken per test. A stand-in redis-benchmark prints
known lines, as the real one does (``\\r`` between progress lines, a summary after each test)."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: per test: the progress lines' rates (the first, 0, is printed before the first reply)
RATES = {"SET": [0.0, 100.0, 300.0, 200.0, 200.0, 40.0, 40.0, 40.0, 40.0, 500.0],
         "GET": [1000.0, 1000.0, 1000.0, 1000.0, 10.0]}
FAKE = """#!{python}
import sys, time
for test, rates, seconds in (("SET", {set_rates}, "2.00"), ("GET", {get_rates}, "1.25")):
    for rate in rates:
        sys.stdout.write(f"{{test}}: rps={{rate:.1f}} (overall: 1.0) avg_msec=1.000 (overall: 1.000)\\r")
        sys.stdout.flush()
        time.sleep(0.01)
    sys.stdout.write(f"====== {{test}} ======\\n  1000 requests completed in {{seconds}} seconds\\n")
    sys.stdout.flush()
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("resp_cluster_bench", ROOT / "scripts" / "resp_cluster_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_progress_lines_become_each_tests_seconds_with_the_servers_figures(
        script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "redis-benchmark"
    fake.write_text(FAKE.format(python=sys.executable, set_rates=RATES["SET"], get_rates=RATES["GET"]))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    reads = iter(range(100))

    def stats() -> dict[str, dict[str, int]]:  # each read of the counters one wait more
        waits = next(reads)
        return {"oregon/p1": {"admission_waits": waits, "client_requests": 10 * waits, "pipeline_batches": waits}}

    phases = script.redis_benchmark(1, 1000, 50, script.Probe([os.getpid()], stats))
    # the leading 0 dropped, then whole seconds of four lines; the last, incomplete second left out
    assert phases["SET"].seconds == [200.0, 40.0]
    assert phases["SET"].slowest == 40.0 and phases["SET"].slowest_index == 1
    assert phases["GET"].seconds == [1000.0] and phases["GET"].slowest == 1000.0
    assert phases["SET"].rate == 500.0 and phases["GET"].rate == 800.0  # requests / the summary's seconds
    # per second: this process's cores used, then its loop's wait for a core
    assert [len(load) for load in phases["SET"].server_load] == [2, 2]
    assert all(value >= 0 for load in phases["SET"].server_load for value in load)
    # the counters over each test alone: read at the start, after SET, after GET
    assert phases["SET"].counters == phases["GET"].counters == {
        "oregon/p1": {"admission_waits": 1, "client_requests": 10, "pipeline_batches": 1}}
