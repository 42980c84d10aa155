"""The driver meets deadlines microseconds away within the call that parked the write, or inside
one timer callback (``okapikv.server.loop_timer``, ``Host.spin_deadline``: ``SPIN_US`` and
``SPIN_BUDGET_US``): Cure's
writes take one clock microsecond each, so a batch of n PUTs at one clock reading leaves n - 1
waiting for the next microseconds, and event-loop timers (millisecond granularity) would hold each
of them a millisecond, one callback per write."""

from __future__ import annotations

import asyncio

from okapikv.cluster.config import local_cluster
from okapikv.cluster.ports import free_port_block
from okapikv.core.messages import PutRequest, Session
from okapikv.server.node import PartitionNode

WRITES = 30


def test_a_batch_of_cure_writes_waiting_for_the_next_microseconds_drains_in_a_few_callbacks() -> None:
    async def scenario() -> tuple[int, int]:
        config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=45500, protocol="cure")
        node = PartitionNode(config, 0, 0)
        node.start()
        callbacks = 0
        # the node's loop timer counts its callbacks (the node itself may be compiled: its methods stay)
        timer = node._timer
        assert timer is not None
        on_timer = timer._callback

        def counted() -> None:
            nonlocal callbacks
            callbacks += 1
            on_timer()

        timer._callback = counted
        try:
            await asyncio.sleep(0.02)  # past the start's first rounds
            callbacks = 0
            node.core.stats.waits.clear()
            node.run_core([PutRequest(index + 1, b"k%02d" % index, b"v", Session((0,), 0)) for index in range(WRITES)])
            ticks = node.core.stats.waits.get("clock_tick")
            assert ticks is not None and ticks.count > 0  # one write per microsecond: the others waited
            for _ in range(200):
                if node.core.parked_count == 0:
                    break
                await asyncio.sleep(0.001)
            return callbacks, len(node.core.store)
        finally:
            await node.close()

    callbacks, stored = asyncio.run(scenario())
    assert stored == WRITES
    # A callback per write without the spin; a few with it (one, plus any that hit the spin budget
    # or a periodic deadline of the server's own).
    assert callbacks <= 6, callbacks



class SlowClock:
    """A server clock that advances one microsecond per ``CALLS_PER_US`` readings: the deadline of a
    write parked for the next microsecond lies in the future when the driver arms its timer, as
    it does on a fast machine (on a slow one the batch itself outlasts the microsecond)."""

    CALLS_PER_US = 4

    def __init__(self, start_us: int) -> None:
        self.start_us = start_us
        self.calls = 0

    def now_us(self) -> int:
        self.calls += 1
        return self.start_us + self.calls // self.CALLS_PER_US

    def seconds_until(self, clock_us: int) -> float:
        return max(0.0, (clock_us - self.now_us()) / 1_000_000)


def test_a_cure_write_parked_for_the_next_microsecond_in_a_client_batch_goes_without_a_millisecond_timer() -> None:
    """Writes parked while a client batch is handled (``run_core``) are released before the call
    returns, as the clock reaches their microseconds: neither by a timer rounded up to a whole
    millisecond (``LoopTimer.arm``) nor on the loop's next round, after every other callback of this
    one (milliseconds at a peak). The loop's own time is frozen, so no loop timer can fire (the figure
    printed is the second of two writes' wait as the core counts it)."""

    async def scenario() -> tuple[int, int, int, str]:
        config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=free_port_block(1),
                               protocol="cure")
        node = PartitionNode(config, 0, 0)
        node.start()
        try:
            await asyncio.sleep(0.02)  # past the start's first rounds
            real_clock = node.clock
            node.clock = SlowClock(real_clock.now_us())  # type: ignore[assignment]
            loop = asyncio.get_running_loop()
            frozen = loop.time()
            loop.time = lambda: frozen  # type: ignore[method-assign]
            node.core.stats.waits.clear()
            node.run_core([PutRequest(index + 1, b"k%02d" % index, b"v", Session((0,), 0)) for index in range(WRITES)])
            parked = node.core.parked_count  # right after the call: nothing left for a later round
            ticks = node.core.stats.waits.get("clock_tick")
            waited = 0 if ticks is None else ticks.count
            stored = len(node.core.store)
            del loop.time
            # The figure (printed, not asserted): two writes at one reading of the real clock, the
            # second's wait as the core counts it (from parking to release, clock microseconds).
            node.clock = real_clock
            node.core.stats.waits.clear()
            node.run_core([PutRequest(index + 1, b"r%02d" % index, b"v", Session((0,), 0)) for index in range(2)])
            for _ in range(200):
                if node.core.parked_count == 0:
                    break
                await asyncio.sleep(0)
            waits = node.core.stats.waits.get("clock_tick")
            figure = f"{waits.count} clock_tick wait of {waits.max_us} us" if waits else "no wait"
            return parked, waited, stored, figure
        finally:
            await node.close()

    parked, waited, stored, figure = asyncio.run(scenario())
    assert waited == WRITES - 1  # one write per microsecond: the others waited for theirs
    assert parked == 0 and stored == WRITES
    print(f"two Cure writes at one reading of the real clock: {figure}")
