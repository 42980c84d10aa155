"""The paper's qualitative result on a small simulated deployment (Okapi sections 3.1-3.2, 5):
under 10 ms of clock skew Okapi never waits; Cure waits on PUTs and on RO-TX slices, more often the
more partitions a RO-TX reads; GentleRain's RO-TX waits track the delay to the furthest DC."""

from __future__ import annotations

from dataclasses import replace

from okapikv.core.deployment import PAPER_WAN_MS
from okapikv.sim import SimConfig, Simulation
from okapikv.sim.config import PAPER_MIX
from okapikv.sim.engine import SimResult

BASE = SimConfig(num_partitions=8, num_clients=12, duration_s=0.5, clock_skew_ms=10, mix=PAPER_MIX,
                 record=False, visibility_sample=0.0)


def _run(**changes: object) -> SimResult:
    return Simulation(replace(BASE, **changes)).run()  # type: ignore[arg-type]


def _read_txs(result: SimResult) -> int:
    return sum(counter["read_tx"] for counter in result.server_operations.values())


def test_okapi_never_waits_under_clock_skew() -> None:
    for partitions in (1, 4):
        result = _run(protocol="okapi", rotx_partitions=partitions)
        assert _read_txs(result) > 500
        assert result.waits == {}


def test_cure_waits_grow_with_partitions_per_read_transaction() -> None:
    per_transaction = []
    for partitions in (1, 2, 4, 8):
        result = _run(protocol="cure", rotx_partitions=partitions)
        assert result.waits["put_dependency"].count > 0
        tx_waits = result.waits["tx_clock"]
        assert 0.5 < tx_waits.mean_us / 1000 < 10, "a wait lasts a fraction of the skew"
        per_transaction.append(tx_waits.count / _read_txs(result))
    assert per_transaction == sorted(per_transaction), per_transaction
    assert per_transaction[-1] > 3 * per_transaction[0], per_transaction


def test_gentlerain_read_transactions_wait_for_the_furthest_dc() -> None:
    result = _run(protocol="gentlerain")
    furthest_ms = [max(row) for row in PAPER_WAN_MS]  # oregon 65, virginia 38, ireland 65
    means_ms = [result.waits_by_dc[dc]["tx_stable"].mean_us / 1000 for dc in range(3)]
    for dc in range(3):
        assert furthest_ms[dc] <= means_ms[dc] <= furthest_ms[dc] + 30, (dc, means_ms)
    # Virginia's furthest DC is 27 ms closer than Oregon's and Ireland's: so are its waits
    assert 17 <= means_ms[0] - means_ms[1] <= 37, means_ms
    assert 17 <= means_ms[2] - means_ms[1] <= 37, means_ms
    # and twice the WAN delays roughly double the waits
    doubled = _run(protocol="gentlerain", wan_ms=tuple(tuple(2 * d for d in row) for row in PAPER_WAN_MS))
    doubled_ms = [doubled.waits_by_dc[dc]["tx_stable"].mean_us / 1000 for dc in range(3)]
    for dc in range(3):
        assert 1.6 * means_ms[dc] <= doubled_ms[dc] + 10 <= 2.4 * means_ms[dc] + 20, (means_ms, doubled_ms)
