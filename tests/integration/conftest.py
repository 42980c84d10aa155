"""Fixtures for the integration tests: real server processes, always torn down (see
``integration_support``); a failing test prints the tail of every server's log."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from integration_support import ClusterFactory, RunningCluster, cluster_processes


@pytest.fixture
def cluster_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    with cluster_processes(tmp_path) as (make, clusters):
        yield make
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for cluster in clusters:
                print(cluster.all_tails())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    """2 DCs x 2 partitions, 5 ms one-way WAN, a 2 MiB message limit; shared by a module's tests."""
    with cluster_processes(tmp_path_factory.mktemp("cluster")) as (make, _):
        yield make(max_message_bytes=2 << 20)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"rep_{report.when}", report)  # read by cluster_factory's teardown
    return report
