"""The driver meets deadlines microseconds away inside one timer callback (``PartitionNode._on_timer``,
``SPIN_US`` and ``SPIN_BUDGET_US``): Cure's writes take one clock microsecond each, so a batch of n
PUTs at one clock reading leaves n - 1 waiting for the next microseconds, and event-loop timers
(millisecond granularity) would hold each of them a millisecond, one callback per write."""

from __future__ import annotations

import asyncio

from okapikv.cluster.config import local_cluster
from okapikv.core.messages import PutRequest, Session
from okapikv.server.node import PartitionNode

WRITES = 30


def test_a_batch_of_cure_writes_waiting_for_the_next_microseconds_drains_in_a_few_callbacks() -> None:
    async def scenario() -> tuple[int, int]:
        config = local_cluster(dcs=("solo",), partitions=1, wan="off", base_port=45500, protocol="cure")
        node = PartitionNode(config, 0, 0)
        node.start()
        callbacks = 0
        on_timer = node._on_timer

        def counted() -> None:
            nonlocal callbacks
            callbacks += 1
            on_timer()

        node._on_timer = counted  # type: ignore[method-assign]
        try:
            await asyncio.sleep(0.02)  # past the start's first rounds
            callbacks = 0
            node.run_core([PutRequest(index + 1, b"k%02d" % index, b"v", Session((0,), 0)) for index in range(WRITES)])
            assert node.core.parked_count > 0  # one write per microsecond: the others wait
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
