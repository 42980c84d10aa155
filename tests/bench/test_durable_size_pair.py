"""``suites.fast.durable_size_pair``: the data-size row's partitions run at once, each loaded, and
are measured back to back in the order asked, every window starting with every log checkpointed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.suites.fast import durable_size_pair


@dataclass(frozen=True)
class FakeSut:
    label: str
    number: int


class FakeBench:
    """What ``durable_size_pair`` calls, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.running: set[int] = set()
        self.ui = SimpleNamespace(message=lambda text: None)

    @contextlib.contextmanager
    def start(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        number = len(self.calls)
        self.calls.append(("start", str(number)))
        self.running.add(number)
        try:
            yield FakeSut(str(number), number)
        finally:
            self.running.discard(number)
            self.calls.append(("stop", str(number)))

    def load(self, sut: Any, records: int) -> float:
        self.calls.append(("load", str(sut.number), str(records)))
        return records / 1000

    def settle_checkpoints(self, sut: Any) -> float:
        self.calls.append(("settle", str(sut.number)))
        return 1.5

    def workload(self, name: str, sut: Any, records: int) -> Any:
        return SimpleNamespace(records=records)

    def measure(self, sut: Any, workload: Any, clients: int, **kwargs: Any) -> Any:
        self.calls.append(("measure", str(sut.number), str(workload.records), str(len(self.running))))
        return SimpleNamespace(throughput_ops_s=float(workload.records))


def test_both_partitions_run_at_once_and_are_measured_back_to_back_in_the_order_asked() -> None:
    for first, order in (("large", ["1000000", "10000"]), ("small", ["10000", "1000000"])):
        bench = FakeBench()
        found = durable_size_pair(bench, {"large": 1_000_000, "small": 10_000}, "t", first=first)  # type: ignore[arg-type]
        measures = [call for call in bench.calls if call[0] == "measure"]
        assert [call[2] for call in measures] == order
        assert all(call[3] == "2" for call in measures)  # both servers up in each window
        assert (found["large"].load_s, found["small"].load_s) == (1000.0, 10.0)
        assert found["large"].run is not None and found["large"].run.throughput_ops_s == 1_000_000
        for index, call in enumerate(bench.calls):  # every window starts once both logs are checkpointed
            if call[0] == "measure":
                assert sorted(bench.calls[index - 2:index]) == [("settle", "0"), ("settle", "2")]
        last_measure = max(index for index, call in enumerate(bench.calls) if call[0] == "measure")
        assert all(call[0] == "stop" for call in bench.calls[last_measure + 1:])
        assert len(bench.calls) - last_measure - 1 == 2

def test_the_partition_measured_first_must_be_one_of_them() -> None:
    with pytest.raises(ValueError, match="measured first"):
        durable_size_pair(FakeBench(), {"large": 10, "small": 1}, "t", first="medium")  # type: ignore[arg-type]
