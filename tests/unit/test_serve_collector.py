"""``okapikv.serve.collector``: a store that grows while serving is frozen out of the collector's
generations once it grew by the threshold, counted from its smallest size, and the serving loop
looks on its own."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from okapikv.serve.collector import FreezeOnGrowth


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """What the test froze goes back to the collector (other tests count on collecting it)."""
    yield
    gc.unfreeze()


def test_the_store_is_frozen_once_it_grew_by_the_threshold_from_its_smallest_size() -> None:
    size = [1_000]
    freezer = FreezeOnGrowth(lambda: size[0], growth=100)
    size[0] = 1_099
    frozen = gc.get_freeze_count()
    assert not freezer.look() and gc.get_freeze_count() == frozen
    size[0] = 1_100
    assert freezer.look() and freezer.freezes == 1
    assert gc.get_freeze_count() > frozen
    size[0] = 500  # versions collected, keys deleted: growth counts from here
    assert not freezer.look()
    size[0] = 599
    assert not freezer.look()
    size[0] = 600
    assert freezer.look() and freezer.freezes == 2


def test_a_growth_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        FreezeOnGrowth(lambda: 0, growth=0)


def test_the_serving_loop_freezes_a_grown_store_on_its_own() -> None:
    size = [0]
    freezer = FreezeOnGrowth(lambda: size[0], growth=10)

    async def main() -> None:
        looking = asyncio.create_task(freezer.run(every_s=0.001))
        size[0] = 10
        try:
            for _ in range(1_000):  # bounded: 1,000 of its periods at most
                if freezer.freezes:
                    break
                await asyncio.sleep(0.001)
        finally:
            looking.cancel()
        assert freezer.freezes == 1

    asyncio.run(main())


def test_the_serving_loop_runs_its_hook_at_start_and_after_each_freeze_off_the_loop() -> None:
    import threading

    size = [0]
    threads: list[int] = []
    freezer = FreezeOnGrowth(lambda: size[0], growth=10, on_freeze=lambda: threads.append(threading.get_ident()))

    async def main() -> None:
        looking = asyncio.create_task(freezer.run(every_s=0.001))
        try:
            for _ in range(1_000):  # bounded: 1,000 of its periods at most
                if threads:
                    break
                await asyncio.sleep(0.001)
            assert len(threads) == 1  # the heap it starts with
            size[0] = 10
            for _ in range(1_000):
                if len(threads) == 2:
                    break
                await asyncio.sleep(0.001)
        finally:
            looking.cancel()
        assert freezer.freezes == 1 and len(threads) == 2
        assert threading.get_ident() not in threads  # on a worker thread, not the loop's

    asyncio.run(main())


def test_the_hook_runs_again_while_the_store_changes_and_not_while_it_is_idle() -> None:
    changes = [0]
    runs: list[int] = []
    freezer = FreezeOnGrowth(lambda: 0, growth=10, on_freeze=lambda: runs.append(changes[0]),
                             activity=lambda: changes[0], refresh_s=0.005)

    async def main() -> None:
        looking = asyncio.create_task(freezer.run(every_s=0.001))
        try:
            for _ in range(50):  # idle: the start's run only
                await asyncio.sleep(0.001)
            assert runs == [0]
            changes[0] = 5  # versions collected: the store changed
            for _ in range(1_000):  # bounded
                if len(runs) == 2:
                    break
                await asyncio.sleep(0.001)
            assert runs == [0, 5]
            for _ in range(50):  # idle again
                await asyncio.sleep(0.001)
            assert runs == [0, 5]
        finally:
            looking.cancel()

    asyncio.run(main())
