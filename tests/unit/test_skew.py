"""The clock skew models (``okapikv.core.skew``; docs/benchmarks.md, "Clock skew models") produce
the documented offsets, and every place that injects skew lays the offsets out by them: `okapi up`
(``local_cluster``), the simulator and `okapi bench` (recorded with each run)."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.cli import options_from_args
from okapikv.bench.engine.results import Run
from okapikv.cli import build_parser
from okapikv.client.policy import COORDINATORS
from okapikv.cluster.config import local_cluster
from okapikv.core.skew import DC_MAJOR, HALF_NORMAL, SKEW_MODELS, UNIFORM, clock_offsets_us, max_skew_in_dc_us
from okapikv.sim import SimConfig, Simulation

MS = 1000


def test_dc_major_spreads_evenly_in_server_order_and_keeps_a_dc_within_a_few_ms() -> None:
    """3 DCs x 4 partitions, X = 10 ms: the servers of a DC are 10 / 11 ms apart, so the largest skew
    inside one DC is 3 x 10 / 11 = 2.7 ms while the DCs are up to 10 ms apart (the layout the
    issue found capping Cure's waits)."""
    offsets = clock_offsets_us(DC_MAJOR, 10 * MS, 12, random.Random(1))
    assert offsets == tuple(round(10 * MS * position / 11) for position in range(12))
    assert offsets[0] == 0 and offsets[-1] == 10 * MS
    assert max_skew_in_dc_us(offsets, 4) in (2727, 2728)  # rounding to whole microseconds


def test_uniform_draws_independent_offsets_in_0_x_from_the_seed() -> None:
    offsets = clock_offsets_us(UNIFORM, 10 * MS, 12, random.Random(7))
    draws = random.Random(7)
    assert offsets == tuple(draws.randint(0, 10 * MS) for _ in range(12))
    assert offsets == clock_offsets_us(UNIFORM, 10 * MS, 12, random.Random(7))  # the seed decides
    assert offsets != clock_offsets_us(UNIFORM, 10 * MS, 12, random.Random(8))
    many = clock_offsets_us(UNIFORM, 10 * MS, 4000, random.Random(1))
    assert min(many) >= 0 and max(many) <= 10 * MS
    assert abs(sum(many) / len(many) - 5 * MS) < 250  # mean X / 2
    # independent per server: one DC's servers are spread like any others' (not ~X/3 as dc-major)
    assert max_skew_in_dc_us(many, 4) > 9 * MS


def test_half_normal_draws_the_absolute_value_of_a_normal_with_deviation_x() -> None:
    offsets = clock_offsets_us(HALF_NORMAL, 10 * MS, 12, random.Random(3))
    draws = random.Random(3)
    assert offsets == tuple(round(abs(draws.gauss(0.0, 10 * MS))) for _ in range(12))
    many = clock_offsets_us(HALF_NORMAL, 10 * MS, 4000, random.Random(1))
    assert min(many) >= 0
    assert abs(sum(many) / len(many) - 10 * MS * math.sqrt(2 / math.pi)) < 300  # mean X sqrt(2 / pi)
    assert max(many) > 10 * MS  # it is not bounded by X


def test_no_skew_is_zero_everywhere_and_a_bad_model_or_skew_is_refused() -> None:
    for model in SKEW_MODELS:
        assert clock_offsets_us(model, 0, 5, random.Random(1)) == (0,) * 5
    with pytest.raises(ValueError, match="unknown clock skew model 'ntp'; choose one of uniform, half-normal"):
        clock_offsets_us("ntp", 10, 3, random.Random(1))
    with pytest.raises(ValueError, match="must not be negative"):
        clock_offsets_us(UNIFORM, -1, 3, random.Random(1))
    assert max_skew_in_dc_us((), 4) == 0


def test_okapi_up_keeps_dc_major_by_default_and_draws_the_others_from_its_seed() -> None:
    spread = local_cluster(dcs=("a", "b"), partitions=3, wan="off", clock_skew_ms=10, base_port=7000)
    assert [s.clock_skew_ms for s in spread.servers] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    drawn = local_cluster(dcs=("a", "b"), partitions=3, wan="off", clock_skew_ms=10, base_port=7000,
                          clock_skew_model=UNIFORM, clock_skew_seed=5)
    assert [s.clock_skew_ms for s in drawn.servers] == [
        offset / 1000 for offset in clock_offsets_us(UNIFORM, 10 * MS, 6, random.Random(5))]
    args = build_parser().parse_args(["up", "--clock-skew-ms", "10", "--clock-skew-model", "half-normal",
                                      "--clock-skew-seed", "2"])
    assert (args.clock_skew_model, args.clock_skew_seed) == (HALF_NORMAL, 2)


def test_the_simulator_lays_its_offsets_out_by_the_model_and_reports_the_skew_inside_a_dc() -> None:
    config = SimConfig(num_dcs=2, num_partitions=3, num_clients=0, duration_s=0.01, clock_skew_ms=10,
                       clock_skew_model=DC_MAJOR)
    simulation = Simulation(config)
    assert [clock.offset_us for clock in simulation.world.clocks] == [0, 2000, 4000, 6000, 8000, 10000]
    meta = simulation._meta()
    assert (meta["clock_skew_model"], meta["max_dc_skew_ms"]) == (DC_MAJOR, 4.0)
    assert SimConfig().clock_skew_model == UNIFORM
    with pytest.raises(ValueError, match="unknown clock skew model"):
        SimConfig(clock_skew_model="ntp").validate()


def test_okapi_bench_defaults_to_the_paper_like_model_and_records_it_with_each_run() -> None:
    options = options_from_args(build_parser().parse_args(["bench", "--suite", "paper"]))
    assert (options.clock_skew_model, options.coordinator) == (UNIFORM, "session")
    assert options.to_config()["clock_skew_model"] == UNIFORM
    chosen = options_from_args(build_parser().parse_args(["bench", "--clock-skew-model", "dc-major",
                                                          "--coordinator", "first-key"]))
    assert (chosen.clock_skew_model, chosen.coordinator) == (DC_MAJOR, "first-key")
    names = {field for field in Run.__dataclass_fields__}
    assert {"clock_skew_model", "max_dc_skew_ms", "coordinator"} <= names
    # the command line offers the client's coordinators (spelled out there to keep `okapi` fast to start)
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--coordinator", "random"])
    for coordinator in COORDINATORS:
        assert parser.parse_args(["bench", "--coordinator", coordinator]).coordinator == coordinator
