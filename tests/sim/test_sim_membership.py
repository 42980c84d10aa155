"""Membership changes as nemesis events (``okapikv.sim.membership``; docs/protocol.md,
"Membership"): a whole DC lost, removed, and brought back on empty disks (joining, then a member),
among the other faults. Seeded runs of the three protocols pass every checker (safety and
liveness); a broken variant, survivors that stop counting a lost DC without relaying what it sent
to some of them only, is caught.
"""

from __future__ import annotations

import pytest

from okapikv.core.messages import Effect, Message, RelayReply, RelayRequest
from okapikv.core.server import PartitionServer
from okapikv.sim.config import SimConfig
from okapikv.sim.runner import RunOutcome, run_simulation


def simulate(protocol: str, seed: int, factory: type[PartitionServer] | None = None) -> RunOutcome:
    config = SimConfig(seed=seed, protocol=protocol, faults=True, membership=True, duration_s=2.0, liveness_s=1.0)
    return run_simulation(config, server_factory=factory)


def anomalies(outcome: RunOutcome) -> list[str]:
    found = list(outcome.result.anomalies) + (list(outcome.report.anomalies) if outcome.report else [])
    return sorted({anomaly.name for anomaly in found})


@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
@pytest.mark.parametrize("seed", [1, pytest.param(4, marks=pytest.mark.slow)])
def test_losing_removing_and_re_adding_a_dc_passes_the_checkers(protocol: str, seed: int) -> None:
    outcome = simulate(protocol, seed)
    changes = [record.description for record in outcome.result.faults if "membership epoch" in record.description]
    assert any("removed" in change for change in changes) and any("member (at" in change for change in changes)
    assert anomalies(outcome) == []


class NoRelay(PartitionServer):
    """Broken: a survivor answers a relay request with its reply only, none of the removed DC's
    updates, so the survivors stop counting the lost DC while one of them lacks what it sent."""

    def _dispatch(self, message: Message, now_us: int, since_us: int) -> list[Effect]:
        if not isinstance(message, RelayRequest):
            return super()._dispatch(message, now_us, since_us)
        return [effect for effect in self.members.on_relay_request(message, now_us)
                if isinstance(getattr(effect, "message", None), RelayReply)]


def test_survivors_that_do_not_relay_are_caught() -> None:
    assert anomalies(simulate("okapi", 1, NoRelay))


def test_a_dead_senders_batches_are_not_resent_to_a_restarted_receiver() -> None:
    """dc2 is lost (every server killed) while a batch of dc2/p0 is on its way to dc1/p0, which
    crashes next and restarts after dc2 is back on new servers. The dead sender's link resends
    nothing (``World._hold``): the batch does not stay on the replication ledger while dc2's new
    servers heartbeat past it, which read as a heartbeat overtaking an update (ReplicationPromise)."""
    config = SimConfig(seed=8, num_dcs=3, num_partitions=4, num_clients=12, duration_s=1.0, faults=True,
                       membership=True, liveness_s=0.25)
    outcome = run_simulation(config)
    faults = [record.description for record in outcome.result.faults]
    assert any("lose dc2" in fault for fault in faults) and any("crash dc1/p0" in fault for fault in faults)
    assert anomalies(outcome) == []
