"""The idle CPU a paper-suite run subtracts is measured at the servers' busy periods
(``benchmarks.harness.awake``): while one write every quarter second runs, no server of a 2 DC x 2
partition cluster backs off to idle pacing; left alone past ``idle_after_ms``, they do."""

from __future__ import annotations

import time
from typing import Any

import pytest

from benchmarks.harness.awake import kept_awake
from benchmarks.harness.clusters import RunningCluster, start_local

pytestmark = pytest.mark.slow

#: past the default idle_after_ms (1 s) with room for a loaded machine
LONGER_THAN_IDLE_AFTER_S = 2.5


def idle_spells(cluster: RunningCluster) -> int:
    """Times any server of ``cluster`` backed off to idle pacing (Stats ``core.idle_spells``)."""
    stats: dict[str, dict[str, Any]] = cluster.fetch_stats()
    assert len(stats) == len(cluster.servers), "a server did not answer Stats"
    return sum(int(document["core"]["idle_spells"]) for document in stats.values())


def test_one_write_a_quarter_second_keeps_every_server_of_every_dc_at_its_busy_periods() -> None:
    cluster = start_local(protocol="okapi", dcs=("a", "b"), partitions=2, wan=5.0)
    try:
        with kept_awake(cluster.dc_addresses()[0]) as awake:
            time.sleep(0.5)  # the first writes snap every server back from its start
            before = idle_spells(cluster)
            time.sleep(LONGER_THAN_IDLE_AFTER_S)
            during = idle_spells(cluster)
        assert awake.writes >= 5 and awake.failures == 0
        assert during == before, "a server backed off while the writes kept the cluster awake"
        time.sleep(LONGER_THAN_IDLE_AFTER_S)
        assert idle_spells(cluster) > during, "left alone, no server backed off: the test proves nothing"
    finally:
        cluster.stop()
