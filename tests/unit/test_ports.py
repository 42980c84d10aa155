"""Where local clusters put their ports (``okapikv.cluster.ports``): confined by ``OKAPI_PORT_RANGE``,
and reserved, so two processes drawing at once never get the same block."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest

from okapikv.cluster import ports
from okapikv.cluster.ports import free_port_block


def _range_for_this_test(width: int, region: int) -> tuple[int, int]:
    """A range of ``width`` ports (a multiple of the 8-port reservation slots) that concurrent test
    runs are unlikely to share; each test has its own ``region`` (22000-25999, 26000-26999), since a
    process never draws a block it still holds (tests/e2e/test_e2e_fuzz.py uses 27000-30999)."""
    low = 22_000 + 4_000 * region + width * (os.getpid() % 25)
    return low, low + width - 1


def test_the_default_range_lies_below_the_ephemeral_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OKAPI_PORT_RANGE", raising=False)
    assert ports.local_port_range() == range(10_000, 32_000)


def test_okapi_port_range_confines_every_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = _range_for_this_test(128, region=0)
    monkeypatch.setenv("OKAPI_PORT_RANGE", f"{low}-{high}")
    blocks = [free_port_block(6) for _ in range(5)]
    assert all(low <= base and base + 5 <= high for base in blocks), blocks
    # reserved: this process never draws an overlapping block while it holds the first ones
    spans = sorted((base, base + 5) for base in blocks)
    assert all(first[1] < second[0] for first, second in zip(spans, spans[1:], strict=False)), spans


def test_another_process_cannot_draw_a_reserved_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process holds the whole (one-slot) range, free as its ports are: another process that
    draws there finds nothing, where probing alone would hand it the same ports."""
    first, _ = _range_for_this_test(8, region=1)
    for low in range(first, 27_000, 8):  # a slot this process does not hold already, nor anyone else
        high = low + 7
        monkeypatch.setenv("OKAPI_PORT_RANGE", f"{low}-{high}")
        with contextlib.suppress(RuntimeError):
            assert free_port_block(8) == low
            break
    else:
        pytest.fail("no free 8-port slot in 26000-26999")
    child = subprocess.run(
        [sys.executable, "-c", "from okapikv.cluster.ports import free_port_block; print(free_port_block(1))"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OKAPI_PORT_RANGE": f"{low}-{high}"})
    assert child.returncode != 0, f"the other process drew port {child.stdout.strip()} of a reserved block"
    assert "no block of 1 free ports" in child.stderr


@pytest.mark.parametrize("text", ["20000", "20000-", "a-b", "30000-20000", "80-90", "20000-70000", "1-2-3"])
def test_a_malformed_range_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("OKAPI_PORT_RANGE", text)
    with pytest.raises(RuntimeError, match="OKAPI_PORT_RANGE"):
        free_port_block(1)


def test_a_block_larger_than_the_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OKAPI_PORT_RANGE", "20000-20003")
    with pytest.raises(RuntimeError, match="no block of 5 ports fits in 20000-20003"):
        free_port_block(5)
