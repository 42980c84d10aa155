"""``okapikv.server.collector_clock``: the collector's passes and seconds are counted while some
server holds the clock, and only then; the counters reach a node's Stats."""

from __future__ import annotations

import gc

from okapikv.server.collector_clock import CollectorClock
from okapikv.wire.stats import DriverFigures


def test_passes_are_counted_while_installed_and_not_after() -> None:
    clock = CollectorClock()
    gc.collect()
    assert clock.collector_passes == 0
    clock.install()
    try:
        gc.collect()
        gc.collect(0)
    finally:
        clock.remove()
    assert clock.collector_passes == 2 and clock.collector_seconds > 0
    gc.collect()
    assert clock.collector_passes == 2 and clock._callback not in gc.callbacks


def test_the_clock_counts_until_its_last_holder_removes_it() -> None:
    clock = CollectorClock()
    clock.install()
    clock.install()  # two servers in one process
    clock.remove()
    assert clock.installed
    gc.collect()
    assert clock.collector_passes == 1
    clock.remove()
    clock.remove()  # one too many changes nothing
    assert not clock.installed and gc.callbacks.count(clock._callback) == 0


def test_a_node_reports_the_collector_in_its_driver_figures() -> None:
    names = {field for field in DriverFigures.__dataclass_fields__}
    assert {"collector_passes", "collector_seconds"} <= names
