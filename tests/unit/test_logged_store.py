"""The commit log and its checkpoints (``okapikv.storage.log``, ``okapikv.storage.logged_store``):
round trips through the log alone, replay after a crash, checkpoints that keep disk use bounded, a
torn last record dropped, a damaged record in the middle refused with one line, and kill -9 (a real
SIGKILL of a child process) during an append, a checkpoint and a segment deletion, each followed by
a recovery that holds every acknowledged group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from okapikv.core.mvstore import Change, Version
from okapikv.core.timestamps import pack
from okapikv.storage import DataDamagedError, Identity
from okapikv.storage import log as log_module
from okapikv.storage.checkpoint_process import KILL_POINT
from okapikv.storage.commit_record import RecordFile, Tally
from okapikv.storage.log import SPARE_NAME, SPARE_SLACK, segment_name, segments
from okapikv.storage.logged_store import (
    CHECKPOINT_NICENESS,
    KILL_POINTS,
    NICE_BACKLOG_SEGMENTS,
    LoggedStore,
    niceness,
)
from okapikv.storage.sqlite import CommitGroup, State

IDENTITY = Identity("test", ("a", "b"), 1, "okapi", "a", 0)


def state(vv: int) -> State:
    return State((vv, 0), (vv, 0), (vv, 0), (0, 0))


def group(number: int, count: int = 3, dv: bool = False) -> CommitGroup:
    changes = [Change(b"k%d-%d" % (number, index),
                      Version(b"v%d" % index, pack(1000 * number + index), index % 2, (1, 2) if dv else None), True)
               for index in range(count)]
    return CommitGroup(number, changes, state(number), 10_000 + number)


def keys(store: LoggedStore) -> dict[bytes, bytes | None]:
    return {key: version.value for key, version in store.load_versions()}


def test_groups_in_the_log_alone_come_back_after_a_crash(tmp_path: Path) -> None:
    store = LoggedStore(tmp_path, IDENTITY)
    for number in range(1, 6):
        store.commit(group(number, dv=number == 3))
    assert segments(tmp_path), "the groups are in the log, not yet checkpointed"
    store.close(checkpoint=False)  # as after kill -9: nothing folded into SQLite
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 5 and again.load_state() == state(5) and again.load_clock_bound_us() == 10_005
    loaded = list(again.load_versions())
    assert len(loaded) == 15 and again.replayed == 15
    assert [v.dv for k, v in loaded if k == b"k3-0"] == [(1, 2)]
    again.close()
    assert not segments(tmp_path), "folded into the checkpoint, then deleted"
    third = LoggedStore(tmp_path, IDENTITY)
    assert third.replayed == 0 and len(keys(third)) == 15 and third.load_state() == state(5)
    third.close()


def test_removals_and_overwrites_fold_into_the_checkpoint(tmp_path: Path) -> None:
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=256)
    old = Version(b"old", pack(5), 0, None)
    store.commit(CommitGroup(1, [Change(b"k", old, True)]))
    store.commit(CommitGroup(2, [Change(b"k", Version(b"new", pack(6), 0, None), True), Change(b"k", old, False)]))
    store.checkpoint()
    assert not segments(tmp_path) and store.checkpoints >= 1
    assert keys(store) == {b"k": b"new"} and store.version_count() == 1
    store.close(checkpoint=False)
    assert keys(LoggedStore(tmp_path, IDENTITY)) == {b"k": b"new"}


def test_checkpoints_keep_the_log_bounded(tmp_path: Path) -> None:
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=4096)
    for number in range(1, 200):
        store.commit(group(number, count=5))
    store.checkpoint()
    assert not segments(tmp_path)
    assert store.version_count() == 995
    store.close()


def test_a_checkpoint_process_folds_overwrites_and_removals_and_the_server_deletes_the_segments(
        tmp_path: Path) -> None:
    """The background checkpointer's path (``checkpoint_process``): the fold happens in another
    process, under this store's lock, and this store then reads the checkpoint's group number back."""
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=256)
    old = Version(b"old", pack(5), 0, None)
    store.commit(CommitGroup(1, [Change(b"k", old, True)]))
    store.commit(CommitGroup(2, [Change(b"k", Version(b"new", pack(6), 0, None), True), Change(b"k", old, False)]))
    for number in range(3, 40):
        store.commit(group(number))
    store.checkpoint(in_process=False)
    assert not segments(tmp_path) and store.db.tally.seq == store.tally.seq == 39
    assert store.version_count() == 1 + 37 * 3
    store.commit(group(40))  # the next checkpoint starts from the group the process reached
    store.close()
    present = keys(LoggedStore(tmp_path, IDENTITY))
    assert present[b"k"] == b"new" and b"k40-2" in present and len(present) == 1 + 38 * 3


def test_kill_9_of_the_checkpoint_process_loses_nothing_and_the_next_checkpoint_folds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint process killed before its COMMIT leaves the checkpoint as it was: the server keeps
    every segment (its checkpoint backlog, in ``Stats``), serves on, and the next checkpoint folds
    them all."""
    monkeypatch.setenv("OKAPI_FAULT_INJECTION", "1")
    monkeypatch.setenv("OKAPI_STORAGE_KILL_AT", KILL_POINT)  # every checkpoint process, background ones too
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=512)
    for number in range(1, 60):
        store.commit(group(number))
    with pytest.raises(RuntimeError, match="exited with status -9"):
        store.checkpoint(in_process=False)
    assert segments(tmp_path) and store.db.tally.seq == 0
    assert store.checkpoint_backlog == len(segments(tmp_path))
    store.commit(group(60))
    monkeypatch.delenv("OKAPI_STORAGE_KILL_AT")
    store.checkpoint(in_process=False)
    assert not segments(tmp_path) and store.db.tally.seq == 60 and store.checkpoint_backlog == 0
    store.close(checkpoint=False)
    present = keys(LoggedStore(tmp_path, IDENTITY))
    assert all(b"k%d-%d" % (number, index) in present for number in range(1, 61) for index in range(3))


def test_a_short_checkpoint_backlog_yields_the_cpu_and_a_long_one_does_not() -> None:
    assert niceness(1) == niceness(NICE_BACKLOG_SEGMENTS) == CHECKPOINT_NICENESS > 0
    assert niceness(NICE_BACKLOG_SEGMENTS + 1) == 0


def three_groups_in_the_log(directory: Path) -> None:
    store = LoggedStore(directory, IDENTITY)
    for number in range(1, 4):
        store.commit(group(number))
    store.close(checkpoint=False)


def _torn(directory: Path) -> None:
    """Cut the last record short, as a power loss during its write does: its last bytes never
    reached the disk (zeros where the segment was written in place, missing where it grew)."""
    path = segments(directory)[-1]
    data = path.read_bytes()
    end = len(data.rstrip(b"\0"))
    if end == len(data):
        os.truncate(path, end - 3)
    else:
        path.write_bytes(data[: end - 3] + bytes(len(data) - end + 3))


def _torn_and_reopened(directory: Path) -> LoggedStore:
    """The three groups' log with its last record torn, reopened: the torn group is dropped."""
    _torn(directory)
    # The record file says 3 groups; a power loss would leave it no newer than the log (the torn
    # group was never acknowledged), so make it say 2 as it would.
    (directory / "COMMITTED").unlink()
    record = RecordFile(directory)
    record.write(Tally(2, 6, 3, 0, 0))
    record.close()
    again = LoggedStore(directory, IDENTITY)
    assert again.tally.seq == 2 and len(keys(again)) == 6
    return again


def test_a_torn_last_record_is_dropped(tmp_path: Path) -> None:
    three_groups_in_the_log(tmp_path)
    again = _torn_and_reopened(tmp_path)
    again.commit(group(3))  # the group number goes on where the log ended
    again.close()
    assert len(keys(LoggedStore(tmp_path, IDENTITY))) == 9


def test_a_torn_record_of_an_acknowledged_group_is_lost_data(tmp_path: Path) -> None:
    three_groups_in_the_log(tmp_path)
    _torn(tmp_path)
    with pytest.raises(DataDamagedError, match="lost committed writes.*1 group"):
        LoggedStore(tmp_path, IDENTITY)


def test_a_damaged_record_in_the_middle_stops_the_start_with_one_line(tmp_path: Path) -> None:
    three_groups_in_the_log(tmp_path)
    path = segments(tmp_path)[-1]
    data = bytearray(path.read_bytes())
    at = data.find(b"k2-1")
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DataDamagedError) as caught:
        LoggedStore(tmp_path, IDENTITY)
    message = str(caught.value)
    assert "\n" not in message and "fails its checksum" in message and "--repair" in message
    assert path.exists(), "a refused start changes nothing"


def test_a_gap_in_the_log_is_lost_data(tmp_path: Path) -> None:
    store = LoggedStore(tmp_path, IDENTITY)
    for number in range(1, 4):
        store.commit(group(number))
        store._rotate()  # a segment per group, none checkpointed (the checkpointer is not woken)
    store.close(checkpoint=False)
    assert len(segments(tmp_path)) == 3
    segments(tmp_path)[1].unlink()
    with pytest.raises(DataDamagedError, match="the log lost committed groups: after group 1 it holds group 3"):
        LoggedStore(tmp_path, IDENTITY)


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_logged_store import IDENTITY, group
    from okapikv.storage.logged_store import LoggedStore
    store = LoggedStore(Path({directory!r}), IDENTITY, segment_bytes=2048)
    # Checkpoints run only where this loop asks, in this process, so each kill point is reached
    # here (the background checkpointer folds in a checkpoint process of its own, which
    # test_kill_9_of_the_checkpoint_process_loses_nothing_and_the_next_checkpoint_folds_it kills).
    store._stopping = True
    store._wake.set()
    store._thread.join()
    for number in range(1, 400):
        store.commit(group(number))
        print(number, flush=True)  # acknowledged: the group is durable
        if number % 40 == 0:
            store.checkpoint()
""")


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_9_at_any_point_loses_no_acknowledged_group(tmp_path: Path, point: str) -> None:
    code = CHILD.format(tests=str(Path(__file__).parent), directory=str(tmp_path))
    environment = dict(os.environ, OKAPI_FAULT_INJECTION="1", OKAPI_STORAGE_KILL_AT=point,
                       OKAPI_STORAGE_KILL_AFTER="100")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=60, check=False)
    assert result.returncode == -9, result.stderr
    acknowledged = [int(line) for line in result.stdout.split()]
    store = LoggedStore(tmp_path, IDENTITY)
    try:
        assert store.tally.seq >= (acknowledged[-1] if acknowledged else 0)
        present = keys(store)
        for number in acknowledged:
            assert all(b"k%d-%d" % (number, index) in present for index in range(3)), number
    finally:
        store.close()
    assert not segments(tmp_path)


def test_an_append_cut_short_by_a_full_disk_is_cut_back_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that runs out of space part-way leaves no partial record behind: the retry (the
    group committer's, after the reserve is released) appends the same record cleanly."""
    store = LoggedStore(tmp_path, IDENTITY)
    store.commit(group(1))
    real_write = os.pwrite
    failures = [1]

    def short_write(descriptor: int, data: bytes | memoryview, offset: int) -> int:
        if failures:
            failures.pop()
            real_write(descriptor, bytes(data[: len(data) // 2]), offset)
            raise OSError(28, "No space left on device")
        return real_write(descriptor, data, offset)

    monkeypatch.setattr(os, "pwrite", short_write)
    store.prepare(group(2))
    with pytest.raises(OSError):
        store.finish()
    store.prepare(group(2, count=1))  # a shorter record in the same place: the failed one left nothing behind
    store.finish()
    store.record()
    monkeypatch.setattr(os, "pwrite", real_write)
    store.close(checkpoint=False)
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 2 and len(keys(again)) == 4
    again.close()


def test_a_segment_opened_for_a_group_that_never_came_is_reused(tmp_path: Path) -> None:
    store = LoggedStore(tmp_path, IDENTITY)
    for number in (1, 2):
        store.commit(group(number))
    store._rotate()
    store._writer._open(3)  # the crash came after the segment's header, before group 3's record
    store.close(checkpoint=False)
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 2 and len(keys(again)) == 6
    again.commit(group(3))
    again.close()
    final = LoggedStore(tmp_path, IDENTITY)
    assert len(keys(final)) == 9
    final.close()


def _until(condition: Callable[[], bool], deadline_s: float = 30.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_an_idle_open_segment_is_checkpointed_once_it_holds_enough(tmp_path: Path) -> None:
    """The tail of a burst (a bulk load) is folded while the server is quiet (groups of its vectors
    alone go on: they are not writes), not at the end of the next segment, under load; a smaller
    tail waits for more writes (a trickle of writes does not start a checkpoint process each time
    it pauses)."""
    store = LoggedStore(tmp_path, IDENTITY, idle_checkpoint_s=0.05, idle_checkpoint_bytes=1024)
    for number in range(1, 20):  # 1,876 bytes
        store.commit(group(number))
    assert store.checkpoint_backlog == 1, "the open segment, big enough to be closed once idle"
    number = 19

    def quiet() -> bool:
        """A group of 32 bytes every 10 ms until the open segment is closed (then one in the next)."""
        nonlocal number
        if len(segments(tmp_path)) == 1 and not store.checkpoints:
            number += 1
            store.commit(CommitGroup(number, [], state(number)))
        return store.checkpoints == 1

    assert _until(quiet), "closed once idle and folded"
    assert store.checkpoint_backlog == 0 and store.db.tally.seq >= 19
    store.commit(group(number + 1))  # less than idle_checkpoint_bytes: stays in the log
    time.sleep(0.3)
    assert store.checkpoint_backlog == 0 and store.checkpoints == 1
    store.close(checkpoint=False)
    present = keys(LoggedStore(tmp_path, IDENTITY))
    assert all(b"k%d-%d" % (done, index) in present for done in [*range(1, 20), number + 1] for index in range(3))


def test_records_are_written_in_place_over_a_segment_made_ahead(tmp_path: Path) -> None:
    """A segment is made of zeros ahead of use, and its records overwrite them (the file does not
    grow, so an O_DSYNC write commits no file system journal); its zero tail ends the records."""
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=4096)
    made = 4096 + SPARE_SLACK
    store.commit(group(1))
    first = segments(tmp_path)[-1]
    assert first.stat().st_size == made
    assert _until(lambda: (tmp_path / SPARE_NAME).exists()), "the next segment is made once the spare is taken"
    store.commit(group(2))
    assert first.stat().st_size == made and len(segments(tmp_path)) == 1
    store.close(checkpoint=False)
    assert not (tmp_path / SPARE_NAME).exists()
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 2 and len(keys(again)) == 6
    again.close()


def test_without_room_for_a_spare_segments_grow_and_a_torn_tail_is_still_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_module, "SPARE_ROOM", 1 << 40)
    three_groups_in_the_log(tmp_path)
    path = segments(tmp_path)[-1]
    assert path.read_bytes().rstrip(b"\0") == path.read_bytes(), "no zero tail: the segment grew"
    again = _torn_and_reopened(tmp_path)
    again.close()


def test_a_format_1_log_is_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments appended by the builds before segments were written in place (format 1)."""
    monkeypatch.setattr(log_module, "FORMAT", 1)
    monkeypatch.setattr(log_module, "SPARE_ROOM", 1 << 40)
    three_groups_in_the_log(tmp_path)
    monkeypatch.undo()
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 3 and len(keys(again)) == 9
    again.close()


def test_a_segment_renamed_from_the_spare_before_its_header_is_dropped(tmp_path: Path) -> None:
    """A crash between taking the spare and writing the header leaves a newest segment of zeros:
    no group was written to it, so it is dropped and the log goes on."""
    three_groups_in_the_log(tmp_path)
    (tmp_path / segment_name(4)).write_bytes(bytes(4096))
    again = LoggedStore(tmp_path, IDENTITY)
    assert again.tally.seq == 3 and len(keys(again)) == 9
    again.commit(group(4))
    again.close()
    final = LoggedStore(tmp_path, IDENTITY)
    assert final.tally.seq == 4
    final.close()


def test_data_after_a_segments_zeros_is_damage(tmp_path: Path) -> None:
    three_groups_in_the_log(tmp_path)
    path = segments(tmp_path)[-1]
    data = bytearray(path.read_bytes())
    data[-100] = 1
    path.write_bytes(bytes(data))
    with pytest.raises(DataDamagedError) as caught:
        LoggedStore(tmp_path, IDENTITY)
    assert "\n" not in str(caught.value) and "--repair" in str(caught.value)
