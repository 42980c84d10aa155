"""Direct writes of the commit log (``okapikv.storage.log``, module docstring): records within a
segment's zeros go through an ``O_DIRECT`` descriptor as whole blocks, and leave the segment byte
for byte as buffered writes would; a file system that refuses them, at the open or at the first
write, gets buffered writes; a record past the zeros is written buffered."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from okapikv.core.mvstore import Change, Version
from okapikv.core.timestamps import pack
from okapikv.storage import Identity
from okapikv.storage import log as log_module
from okapikv.storage.log import DIRECT_BLOCK, segments
from okapikv.storage.logged_store import LoggedStore
from okapikv.storage.sqlite import CommitGroup, State

IDENTITY = Identity("test", ("a", "b"), 1, "okapi", "a", 0)
SIZES = [1, 3, 40, 1, 7, 2, 90, 5, 1, 12]  # versions per group: records of 60 bytes to 10 KiB


def group(number: int, count: int, value_bytes: int = 100) -> CommitGroup:
    changes = [Change(b"k%d-%d" % (number, index),
                      Version(bytes([number % 251]) * value_bytes, pack(1000 * number + index), index % 2, None), True)
               for index in range(count)]
    return CommitGroup(number, changes, State((number, 0), (number, 0), (number, 0), (0, 0)), 10_000 + number)


def write(directory: Path, groups: list[CommitGroup]) -> LoggedStore:
    store = LoggedStore(directory, IDENTITY, segment_bytes=1 << 20)
    for each in groups:
        store.commit(each)
    return store


def direct_supported(directory: Path) -> bool:
    if not log_module._O_DIRECT:
        return False
    probe = directory / "probe"
    probe.write_bytes(bytes(DIRECT_BLOCK))
    try:
        os.close(os.open(probe, os.O_WRONLY | log_module._O_DIRECT))
    except OSError:
        return False
    finally:
        probe.unlink()
    return True


def values(directory: Path) -> dict[bytes, bytes | None]:
    store = LoggedStore(directory, IDENTITY)
    try:
        return {key: version.value for key, version in store.load_versions()}
    finally:
        store.close(checkpoint=False)


def test_direct_writes_leave_the_segment_as_buffered_writes_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct_supported(tmp_path):
        pytest.skip(f"{tmp_path}'s file system takes no O_DIRECT writes: the buffered path is all there is")
    groups = [group(number, count) for number, count in enumerate(SIZES, start=1)]
    direct = write(tmp_path / "direct", groups)
    assert direct._writer.direct_writes == len(groups) and not direct._writer.direct_refused
    direct.close(checkpoint=False)
    monkeypatch.setattr(log_module, "_O_DIRECT", 0)
    buffered = write(tmp_path / "buffered", groups)
    assert buffered._writer.direct_writes == 0
    buffered.close(checkpoint=False)
    [one], [other] = segments(tmp_path / "direct"), segments(tmp_path / "buffered")
    assert one.read_bytes() == other.read_bytes()
    assert len(values(tmp_path / "direct")) == sum(SIZES)


def test_a_file_system_that_refuses_direct_descriptors_gets_buffered_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def refusing_open(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if log_module._O_DIRECT and flags & log_module._O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing_open)
    store = write(tmp_path, [group(number, count) for number, count in enumerate(SIZES, start=1)])
    assert store._writer.direct_refused and store._writer.direct_writes == 0
    store.close(checkpoint=False)
    monkeypatch.setattr(os, "open", real_open)
    assert len(values(tmp_path)) == sum(SIZES)


def test_a_refused_first_direct_write_is_written_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct_supported(tmp_path):
        pytest.skip(f"{tmp_path}'s file system takes no O_DIRECT writes")
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=1 << 20)
    real_pwrite = os.pwrite
    refused = []

    def refusing_pwrite(descriptor: int, data: bytes | memoryview, offset: int) -> int:
        if descriptor == store._writer._direct:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(descriptor, data, offset)

    monkeypatch.setattr(os, "pwrite", refusing_pwrite)
    for number, count in enumerate(SIZES, start=1):
        store.commit(group(number, count))
    assert len(refused) == 1 and store._writer.direct_refused and store._writer._direct is None
    store.close(checkpoint=False)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert len(values(tmp_path)) == sum(SIZES)


def test_a_record_past_the_zeros_is_written_buffered_and_the_next_segment_directly(tmp_path: Path) -> None:
    if not direct_supported(tmp_path):
        pytest.skip(f"{tmp_path}'s file system takes no O_DIRECT writes")
    store = LoggedStore(tmp_path, IDENTITY, segment_bytes=8 * DIRECT_BLOCK)
    store.commit(group(1, 2))
    store.commit(group(2, 1, value_bytes=log_module.SPARE_SLACK + 64 * 1024))  # runs past the segment's zeros
    deadline = time.monotonic() + 30
    while store._writer._spare is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the next segment's zeros, made and synced by the store's spare thread
    store.commit(group(3, 2))
    assert store._writer.direct_writes == 2  # groups 1 and 3 (the big one filled its segment: 3 opens the next)
    store.close(checkpoint=False)
    found = values(tmp_path)
    assert len(found) == 5 and found[b"k2-0"] == bytes([2]) * (log_module.SPARE_SLACK + 64 * 1024)
