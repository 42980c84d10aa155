"""``Bench.settle_checkpoints``: the durable data-size rows are measured once the servers' bulk-load
checkpoints are done; it waits for every server's backlog to reach 0, gives up at its deadline with
a note, and says so when a server does not report one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from benchmarks.harness.clusters import RunningCluster
from benchmarks.harness.harness import Bench, SystemUnderTest
from benchmarks.harness.options import BenchOptions
from benchmarks.harness.progress import ProgressUI
from benchmarks.harness.systems import System
from okapikv.bench.engine.adapters import TargetSpec
from okapikv.bench.engine.driver import WorkerPool
from okapikv.bench.engine.results import Results


@dataclass
class Backlogs:
    """A cluster of two durable servers whose backlogs go down one answer at a time."""

    answers: list[tuple[int | None, int | None] | None]  # None: neither answered within the Stats timeout
    asked: int = field(default=0)
    servers: tuple[str, ...] = ("a", "b")

    def fetch_stats(self) -> dict[str, dict[str, Any]]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if answer is None:
            return {}
        first, second = answer
        return {"a": {"storage": {"checkpoint_backlog": first}}, "b": {"storage": {"checkpoint_backlog": second}}}


@pytest.fixture
def bench() -> Iterator[Bench]:
    found = Bench(BenchOptions(progress=False), Results(config={}), cast(ProgressUI, None), cast(WorkerPool, None))
    try:
        yield found
    finally:
        found.close()


def _sut(cluster: Backlogs) -> SystemUnderTest:
    return SystemUnderTest(System("okapi"), "okapi", TargetSpec("okapi", ("a",)), cast(RunningCluster, cluster),
                           (), 1, 2, 0.0)


def test_it_waits_until_every_server_has_folded_its_closed_segments(bench: Bench) -> None:
    cluster = Backlogs([(3, 1), None, (1, 0), (0, 1), (0, 0)])
    waited = bench.settle_checkpoints(_sut(cluster), deadline_s=30)
    assert waited is not None and waited >= 0.3 and cluster.asked == 5 and not bench.results.notes


def test_it_gives_up_at_its_deadline_with_a_note(bench: Bench) -> None:
    assert bench.settle_checkpoints(_sut(Backlogs([(2, 0)])), deadline_s=0.2) is None
    assert "2 log segment(s) still to checkpoint" in bench.results.notes[0]
    assert bench.settle_checkpoints(_sut(Backlogs([None])), deadline_s=0.2) is None  # no server answers


def test_a_server_that_reports_no_backlog_is_measured_without_waiting(bench: Bench) -> None:
    cluster = Backlogs([(0, None)])
    assert bench.settle_checkpoints(_sut(cluster), deadline_s=30) is None and cluster.asked == 1
    assert "do not report a checkpoint backlog" in bench.results.notes[0]
