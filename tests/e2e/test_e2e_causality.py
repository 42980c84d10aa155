"""Causal consistency across DCs, end to end: real `okapi client` processes in
two DCs of a real `okapi up --wan-ms 2 --partitions 2` cluster.

A client in oregon writes x, then y, keys on different partitions (so they replicate over different
links and may reach ireland in either order). A client in ireland polls y; once it sees y's new
value, y's causal past (x's new value) must be visible to it too, through GET, through a read-only
transaction, and through a SCAN. Repeated with fresh keys so that some rounds catch replication
mid-flight.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from okapi_processes import ClientProcess, Cluster

from okapikv.core.partitioning import partition_of

pytestmark = pytest.mark.timeout(180)

DCS = ("oregon", "virginia", "ireland")
PARTITIONS = 2
ROUNDS = 20
POLL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home: Path = tmp_path_factory.mktemp("okapi-home")
    running = Cluster(home, DCS, partitions=PARTITIONS, extra=["--wan-ms", "2"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def keys_on_two_partitions(prefix: str) -> tuple[str, str]:
    """Two fresh keys of the round, ``x`` and ``y``, held by different partitions."""
    x = f"{prefix}x"
    for index in range(100):
        y = f"{prefix}y{index}"
        if partition_of(y.encode(), PARTITIONS) != partition_of(x.encode(), PARTITIONS):
            return x, y
    raise AssertionError("no key on another partition")


def test_cross_dc_causality(cluster: Cluster) -> None:
    writer = ClientProcess(cluster.env, "--dc", "oregon")
    reader = ClientProcess(cluster.env, "--dc", "ireland")
    polls_before_visible = []
    try:
        for round_number in range(ROUNDS):
            prefix = f"c{round_number:02d}"
            x, y = keys_on_two_partitions(prefix)
            value_x, value_y = f"vx{round_number}", f"vy{round_number}"
            # The reader has read y (absent) before the writes: its session holds nothing of them.
            assert reader.send(f"GET {y}") == [f"GET {y} null"]
            assert writer.send(f"PUT {x} {value_x}") == [f"PUT {x} not_found"]
            assert writer.send(f"PUT {y} {value_y}") == [f"PUT {y} not_found"]

            polls = 0
            deadline = time.monotonic() + POLL_TIMEOUT_S
            while reader.send(f"GET {y}") != [f"GET {y} {value_y}"]:
                polls += 1
                assert time.monotonic() < deadline, f"round {round_number}: {y} never reached ireland"
            polls_before_visible.append(polls)

            # y is visible, so x (which y depends on) must be visible too, whichever way it is read.
            assert reader.send(f"GET {x}") == [f"GET {x} {value_x}"], f"round {round_number}: GET broke causality"
            assert reader.send(f"TX {y} {x}") == [f"TX {y} {x} BEGIN", f"  {y} {value_y}", f"  {x} {value_x}",
                                                  "TX END"], f"round {round_number}: TX broke causality"
            assert reader.send(f"SCAN {prefix} {prefix}z") == [
                f"SCAN {prefix} {prefix}z BEGIN", f"  {x} {value_x}", f"  {y} {value_y}", "SCAN END",
            ], f"round {round_number}: SCAN broke causality"
        assert writer.stop() == 0 and reader.stop() == 0
    finally:
        writer.close()
        reader.close()
    # Replication takes a few ms: at least some rounds must have seen y missing first, or the test
    # would not be testing anything about ordering.
    assert any(polls > 0 for polls in polls_before_visible), polls_before_visible
