"""What `okapi bench --suite scaling` plans to run: partition levels, sessions, run count."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.harness.options import BenchOptions
from benchmarks.harness.systems import System
from benchmarks.suites import scaling
from benchmarks.suites.registry import planned_runs

SCALING = BenchOptions(suite="scaling")


@pytest.mark.parametrize(("cores", "expected"), [(1, (1, 2)), (2, (1, 2)), (4, (1, 2)), (16, (1, 2, 4, 8)),
                                                 (12, (1, 2, 4, 6))])
def test_default_levels_go_up_to_half_the_cores(monkeypatch: pytest.MonkeyPatch, cores: int,
                                                expected: tuple[int, ...]) -> None:
    monkeypatch.setattr(scaling.os, "cpu_count", lambda: cores)
    assert scaling.levels(SCALING) == expected


def test_given_partitions_are_the_top_level_and_quick_stops_at_two() -> None:
    assert scaling.levels(replace(SCALING, partitions=8, partitions_given=True)) == (1, 2, 4, 8)
    assert scaling.levels(replace(SCALING, partitions=5, partitions_given=True)) == (1, 2, 4, 5)
    assert scaling.levels(replace(SCALING, partitions=1, partitions_given=True)) == (1,)
    assert scaling.levels(replace(SCALING, quick=True)) == (1, 2)


def test_sessions_per_partition_and_the_planned_run_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaling.os, "cpu_count", lambda: 16)
    assert scaling.sessions(SCALING) == scaling.SESSIONS_PER_PARTITION
    assert scaling.sessions(replace(SCALING, clients=(32, 8, 8), clients_given=True)) == (8, 32)
    # 4 levels x 2 workloads x 2 session counts, per protocol
    assert planned_runs(SCALING) == 16
    assert planned_runs(replace(SCALING, systems=(System("okapi"), System("cure")))) == 32
