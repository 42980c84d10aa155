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
