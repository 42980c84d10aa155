"""A brand-new DC joins a running cluster as a nemesis event (``SimConfig.new_dc``;
``okapikv.sim.membership.DcLoss.add_dc``, ``okapikv.core.growth``; docs/protocol.md, "A new DC").

The world's last DC starts unborn; during the fault phase, under the write load and among the other
faults, its servers start empty and repair, the cluster grows by one DC online, and once every
server counts it the DC becomes a member and its clients start. Seeded runs of the three protocols
pass every checker (safety and liveness) over the history of the whole run, and the new DC serves
reads and writes.
"""

from __future__ import annotations

from collections import Counter

import pytest

from okapikv.sim.config import SimConfig
from okapikv.sim.runner import RunOutcome, run_simulation


def simulate(protocol: str, seed: int, **options: object) -> RunOutcome:
    config = SimConfig(seed=seed, protocol=protocol, faults=True, new_dc=True, duration_s=2.0, liveness_s=1.0,
                       **options)  # type: ignore[arg-type]
    return run_simulation(config)


def check(outcome: RunOutcome) -> None:
    changes = [record.description for record in outcome.result.faults if "membership epoch" in record.description]
    assert any("dc2 joins the cluster" in change for change in changes)
    assert any("dc2 member" in change for change in changes)
    assert sorted({anomaly.name for anomaly in outcome.anomalies}) == []
    history = outcome.result.history
    assert history is not None
    served = Counter(op.is_write for op in history.operations if op.dc == 2 and op.ok and not op.final)
    assert served[True] > 0 and served[False] > 0  # the new DC serves writes and reads


@pytest.mark.parametrize("protocol", ["okapi", "cure", "gentlerain"])
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_new_dc_joins_under_load_and_faults_and_the_checkers_find_nothing(protocol: str, seed: int) -> None:
    check(simulate(protocol, seed))


@pytest.mark.slow
def test_a_new_dc_joins_while_another_dc_is_lost_and_re_added() -> None:
    outcome = simulate("okapi", 3, membership=True)
    check(outcome)
    changes = [record.description for record in outcome.result.faults if "membership epoch" in record.description]
    assert any("removed" in change for change in changes)


def test_new_dc_needs_three_dcs_and_faults() -> None:
    with pytest.raises(ValueError, match="new_dc"):
        SimConfig(num_dcs=2, new_dc=True, faults=True).validate()
