"""The scripts whose figures say where a durable operation's CPU goes (docs/benchmarks.md, "Durable
storage: where the durable extra goes, and segments written in place"): ``measure_log_writes`` must
write the three layouts it names, and ``measure_native_path --durable`` must run each read as a
commit group that becomes durable before its results are written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from scripts_support import load_script

from okapikv.storage import log as log_module
from okapikv.storage.group_commit import GroupCommitter


def test_log_writes_measure_segments_written_in_place_directly_and_buffered_and_one_that_grows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("measure_log_writes")
    sizes: list[tuple[bool, int, int]] = []
    real_close = log_module.LogWriter.close

    def close(writer: log_module.LogWriter) -> Path | None:
        assert writer.path is not None
        sizes.append((writer._zeroed > writer.size, writer.path.stat().st_size, writer.direct_writes))
        return real_close(writer)

    monkeypatch.setattr(log_module.LogWriter, "close", close)
    direct = log_module._O_DIRECT
    for layout in script.LAYOUTS:
        latencies, cpu_us = script.write_records(tmp_path, 5, 3000, layout)
        assert len(latencies) == 5 and all(latency > 0 for latency in latencies) and cpu_us > 0
    (zeros_left, made, direct_writes), (buffered_zeros_left, buffered_made, buffered_direct), \
        (grew_zeros_left, grown, grown_direct) = sizes
    assert zeros_left and made == buffered_made == 7 * 3000 + log_module.SPARE_SLACK, "in place: the file kept its size"
    assert buffered_zeros_left and buffered_direct == grown_direct == 0
    assert direct_writes in (0, 6), "direct: every record, unless the file system refuses"
    assert not grew_zeros_left and grown < 7 * 3000, "growing: the file ends at its last record"
    assert log_module.SPARE_ROOM == 4 and direct == log_module._O_DIRECT and not list(tmp_path.iterdir()), \
        "the layout and the directory are restored"


def test_the_durable_python_path_makes_each_read_a_durable_group(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("measure_native_path")
    groups = [0]
    real_finished = GroupCommitter._finished

    def finished(committer: GroupCommitter, *args: Any) -> None:
        groups[0] += 1
        real_finished(committer, *args)

    monkeypatch.setattr(GroupCommitter, "_finished", finished)
    passes = asyncio.run(script._time_durable(640, 8))
    assert len(passes) == 3 and all(us_per_op > 0 for us_per_op in passes)
    reads = (20_000 + 3 * 640) // 64  # the warm-up and three passes, 64 operations a read
    assert reads <= groups[0] <= reads + 5, groups[0]
