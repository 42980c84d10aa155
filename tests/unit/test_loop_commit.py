"""Group commit on the event loop's thread (``GroupCommitter(on_loop=True)``, what a server runs):
the group a turn staged is written by the loop itself at the turn's end, a port's ``commit_due``
writes it before the port's replies leave, a slow write sends the next groups to the worker until
its writes are fast again, and a full disk's retries stay on the worker while writes are refused."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from test_storage import IDENTITY, FullLog, GatedSpace, changes, until

from okapikv.core.timestamps import pack
from okapikv.storage import group_commit
from okapikv.storage.group_commit import GroupCommitter
from okapikv.storage.logged_store import LoggedStore


class ThreadLog(LoggedStore):
    """Records the thread of each append; while ``slow_s`` is set, an append takes that long more
    (``slow_on_loop_s``: one on the loop's thread)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.threads: list[str] = []
        self.slow_s = 0.0
        self.slow_on_loop_s = 0.0  # the same, for the appends on the loop's thread only

    def finish(self) -> None:
        on_loop = threading.current_thread() is threading.main_thread()
        if self.slow_s or (on_loop and self.slow_on_loop_s):
            time.sleep(self.slow_s or self.slow_on_loop_s)
        super().finish()
        self.threads.append("loop" if threading.current_thread() is threading.main_thread() else "worker")


@pytest.fixture(autouse=True)
def _patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """This shared machine's writes take up to tens of milliseconds at times: the tests that look
    at where a group is written set what is slow themselves."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 1.0)
    monkeypatch.setattr(group_commit, "STALL_WRITE_S", 1.0)


def _opened(directory: Path, durable: list[int] | None = None, **options: float) -> tuple[ThreadLog, GroupCommitter]:
    """A ``ThreadLog`` and its committer on the loop, opened (in a running loop); ``durable``: each
    durable group's number, appended as it is released."""
    store = ThreadLog(directory, IDENTITY)
    committer = GroupCommitter(store, on_durable=lambda: None if durable is None else durable.append(committer.durable),
                               on_failure=lambda error: pytest.fail(str(error)), on_loop=True, **options)
    committer.open(pack(1_000), 1_000)
    store.threads.clear()  # (the first clock bound, written at open)
    return store, committer


def test_a_turns_group_is_written_by_the_loop_at_the_turns_end(tmp_path: Path) -> None:
    """Two calls of one turn share a group; the loop's thread writes it once the turn's callbacks
    are done, and the group is durable (its effects released) before the next turn runs."""

    async def main() -> None:
        durable: list[int] = []
        store, committer = _opened(tmp_path, durable)
        assert committer.stage(changes(2), pack(1_000)) == committer.stage(changes(1, prefix=b"o"), pack(1_000)) == 1
        assert committer.durable == 0  # not within the turn
        await asyncio.sleep(0)  # the end of this turn
        assert committer.durable == 1 and durable == [1] and store.threads == ["loop"]
        assert committer.stage(changes(1, prefix=b"again"), pack(1_000)) == 2
        await asyncio.sleep(0)
        assert durable == [1, 2] and store.threads == ["loop", "loop"]
        assert committer.loop_groups == 2 and committer.groups_written == 2 and not committer.pending
        await committer.close(pack(1_000))
        reopened = LoggedStore(tmp_path, IDENTITY)
        assert reopened.version_count() == 4
        reopened.close()

    asyncio.run(main())


def test_commit_due_writes_the_turns_group_before_a_port_writes(tmp_path: Path) -> None:
    """A port about to write its replies (``commit_due``) has the staged group written at once, so
    the replies it holds join that write; with nothing staged it does nothing."""

    async def main() -> None:
        store, committer = _opened(tmp_path)
        committer.commit_due()
        assert committer.groups_written == 0
        committer.stage(changes(1), pack(1_000))
        committer.commit_due()
        assert committer.durable == 1 and store.threads == ["loop"]
        await asyncio.sleep(0.01)  # the turn's end finds nothing more to write
        assert committer.groups_written == 1
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_vector_only_changes_are_still_written_lazily_on_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        store, committer = _opened(tmp_path, lazy_s=0.05)
        committer.stage(changes(0, vv=(0, 77)), pack(1_000))
        await asyncio.sleep(0)
        assert committer.groups_written == 0  # nobody waits for it
        await until(lambda: committer.groups_written == 1)
        assert store.threads == ["loop"]
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_a_slow_write_sends_the_next_groups_to_the_worker_until_its_writes_are_fast(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write slower than ``SLOW_WRITE_S`` on the loop stalls every read of the server for as long,
    so the next groups go to the worker; ``FAST_WRITES_TO_RETURN`` fast worker writes in a row
    bring them back. Groups stay durable in order throughout."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 0.15)
    monkeypatch.setattr(group_commit, "STALL_WRITE_S", 0.15)
    monkeypatch.setattr(group_commit, "FAST_WRITES_TO_RETURN", 2)
    monkeypatch.setattr(group_commit, "SHORT_LOOP_GROUPS", 0)  # (no relapse: 2 each time)

    async def main() -> None:
        durable: list[int] = []
        store, committer = _opened(tmp_path, durable)
        store.slow_s = 0.2
        for number in (1, 2, 3):  # slow: the first on the loop, then the worker's
            committer.stage(changes(1, prefix=b"s%d" % number), pack(1_000))
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert store.threads == ["loop", "worker", "worker"] and committer.slow_fallbacks == 1
        store.slow_s = 0.0
        for number in (4, 5, 6, 7):  # two fast worker writes, then the loop again
            committer.stage(changes(1, prefix=b"f%d" % number), pack(1_000))
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert store.threads[3:] == ["worker", "worker", "loop", "loop"]
        assert durable == list(range(1, 8)) and committer.slow_fallbacks == 1
        await committer.close(pack(1_000))
        reopened = LoggedStore(tmp_path, IDENTITY)
        assert reopened.version_count() == 7
        reopened.close()

    asyncio.run(main())


def test_a_disk_slow_only_for_the_loop_is_tried_ever_less_often(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A fallback within ``SHORT_LOOP_GROUPS`` of the loop's return doubles the fast worker writes
    needed for the next return (a process whose only running thread waits for the disk may wake
    late, one whose loop is busy does not)."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 0.15)
    monkeypatch.setattr(group_commit, "STALL_WRITE_S", 0.15)
    monkeypatch.setattr(group_commit, "FAST_WRITES_TO_RETURN", 1)

    async def main() -> None:
        store, committer = _opened(tmp_path)
        store.slow_on_loop_s = 0.2
        for number in range(1, 10):
            committer.stage(changes(1, prefix=b"b%d" % number), pack(1_000))
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert store.threads == ["loop", *["worker"] * 2, "loop", *["worker"] * 4, "loop"]
        assert committer.slow_fallbacks == 3
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_the_loop_keeps_writing_through_a_few_slow_writes_and_falls_back_on_most(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread of a loaded machine is descheduled now and then whatever it does, so one write over
    ``SLOW_WRITE_S`` is not a slow disk: the groups go to the worker once more than half of the last
    ``RECENT_WRITES`` were slow."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 0.0)  # every write is slow
    monkeypatch.setattr(group_commit, "RECENT_WRITES", 4)

    async def main() -> None:
        store, committer = _opened(tmp_path)
        for number in (1, 2, 3, 4):
            committer.stage(changes(1, prefix=b"m%d" % number), pack(1_000))
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert store.threads == ["loop", "loop", "loop", "worker"] and committer.slow_fallbacks == 1
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_a_reply_waits_for_at_most_one_slow_write_on_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Liveness beside a slow disk: while groups of 200 ms writes keep coming, a callback of the loop
    (a read's turn) waits for one such write, the first, and then for none: the worker writes them."""
    monkeypatch.setattr(group_commit, "SLOW_WRITE_S", 0.15)
    monkeypatch.setattr(group_commit, "STALL_WRITE_S", 0.15)

    async def main() -> None:
        store, committer = _opened(tmp_path)
        store.slow_s = 0.2
        loop = asyncio.get_running_loop()
        stalls: list[float] = []
        for number in range(1, 5):
            committer.stage(changes(1, prefix=b"w%d" % number), pack(1_000))
            before = loop.time()
            await asyncio.sleep(0)  # a turn of the loop: a read would be served in it
            stalls.append(loop.time() - before)
            await until(lambda: committer.durable == number)  # noqa: B023 (awaited at once)
        assert stalls[0] >= 0.2 and max(stalls[1:]) < 0.2, stalls
        await committer.close(pack(1_000))

    asyncio.run(main())


def test_a_full_disk_is_retried_on_the_worker_and_writes_are_refused_meanwhile(tmp_path: Path) -> None:
    """An append on the loop that finds no space: the same group is retried on the worker from the
    released reserve (it stays in flight, the next group waits behind it), the committer refuses
    writes (``disk_full``) and the groups go to the worker, whose checks find the space back."""

    async def main() -> None:
        store = FullLog(tmp_path, IDENTITY)
        space = GatedSpace(tmp_path, 1 << 20)
        space.prepare()
        committer = GroupCommitter(store, on_durable=lambda: None, on_failure=lambda error: pytest.fail(str(error)),
                                   space=space, on_loop=True)
        committer.open(pack(1_000), 1_000)
        store.full = 1
        assert committer.stage(changes(3), pack(1_000)) == 1
        await asyncio.sleep(0)
        assert committer.full_commits == 1 and committer.disk_full and committer.durable == 0
        assert committer.stage(changes(1, prefix=b"behind"), pack(1_000)) == 2  # waits behind group 1
        await until(lambda: committer.durable == 2)
        assert committer.loop_groups == 0 and store.version_count() == 4
        space.space_back = True
        committer.stage(changes(0, vv=(0, 1)), pack(1_000))
        await until(lambda: not committer.disk_full and space.reserved, timeout_s=10)
        committer.stage(changes(1, prefix=b"after"), pack(1_000))
        await until(lambda: committer.durable == 4)
        assert committer.loop_groups == 1  # room again: back on the loop
        await committer.close(pack(1_000))

    asyncio.run(main())
