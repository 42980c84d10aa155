"""Where local clusters put their ports (``okapikv.cluster.ports``): confined by ``OKAPI_PORT_RANGE``,
and reserved, so two processes drawing at once never get the same block."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from okapikv.cluster.ports import free_port_block, local_port_range


def _range_for_this_test(width: int) -> tuple[int, int]:
    """A range of ``width`` ports (a multiple of the 8-port reservation slots) that concurrent test
    runs are unlikely to share."""
    low = 24_000 + width * (os.getpid() % 50)
    return low, low + width - 1


def test_the_default_range_lies_below_the_ephemeral_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OKAPI_PORT_RANGE", raising=False)
    assert local_port_range() == range(10_000, 32_000)


def test_okapi_port_range_confines_every_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = _range_for_this_test(128)
    monkeypatch.setenv("OKAPI_PORT_RANGE", f"{low}-{high}")
    assert local_port_range() == range(low, high + 1)
    blocks = [free_port_block(6) for _ in range(5)]
    assert all(low <= base and base + 5 <= high for base in blocks), blocks
    # reserved: this process never draws an overlapping block while it holds the first ones
    spans = sorted((base, base + 5) for base in blocks)
    assert all(first[1] < second[0] for first, second in zip(spans, spans[1:], strict=False)), spans


def test_another_process_cannot_draw_a_reserved_block(monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = _range_for_this_test(32)
    monkeypatch.setenv("OKAPI_PORT_RANGE", f"{low}-{high}")
    mine = free_port_block(4)  # reserves one or two of the range's four slots
    child = subprocess.run(
        [sys.executable, "-c", "from okapikv.cluster.ports import free_port_block; print(free_port_block(4))"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OKAPI_PORT_RANGE": f"{low}-{high}"})
    assert child.returncode == 0, child.stderr
    theirs = int(child.stdout)
    assert theirs + 3 < mine or theirs > mine + 3, (mine, theirs)


@pytest.mark.parametrize("text", ["20000", "20000-", "a-b", "30000-20000", "80-90", "20000-70000", "1-2-3"])
def test_a_malformed_range_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("OKAPI_PORT_RANGE", text)
    with pytest.raises(RuntimeError, match="OKAPI_PORT_RANGE"):
        free_port_block(1)


def test_a_block_larger_than_the_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OKAPI_PORT_RANGE", "20000-20003")
    with pytest.raises(RuntimeError, match="no block of 5 ports fits in 20000-20003"):
        free_port_block(5)
