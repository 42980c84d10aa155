"""The paper's experiments as simulator runs (``okapikv.sim.experiments``): their points, the
peak-throughput sweep, and the checked first run."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from okapikv.sim.cost import packaged_profile
from okapikv.sim.experiments import (
    EXPERIMENTS,
    FLAT_STEPS,
    MAX_SWEEP_STEPS,
    PEAK_GROWTH,
    Plan,
    config_of,
    little_ratio,
    points,
    run_experiment,
    steady,
    sweep_start,
)

PLAN = Plan(dcs=3, partitions=32)


def test_each_experiment_has_the_papers_points() -> None:
    assert {p.partitions for p in points("fig3", PLAN)} == {2, 4, 8, 16, 32}
    assert {p.rotx_partitions for p in points("fig4", PLAN)} == {1, 2, 4, 8, 16, 32}
    assert {p.rotx_partitions for p in points("fig5", PLAN)} == {1, 4, 16}
    assert {p.write_ratio for p in points("write-ratio", PLAN)} == {0.05, 0.1, 0.25, 0.5, 0.75, 0.9}
    assert all(p.clients == 8 * 32 * 3 for p in points("traffic", PLAN))
    for name in EXPERIMENTS:
        assert {p.system for p in points(name, PLAN)} == {"okapi", "cure", "gentlerain"}
    small = Plan(partitions=3)
    assert {p.rotx_partitions for p in points("fig4", small)} == {1, 2, 3}
    with pytest.raises(ValueError, match="unknown experiment"):
        points("fig9", PLAN)


def test_a_sweep_doubles_the_clients_until_the_throughput_stops_growing() -> None:
    plan = Plan(dcs=2, partitions=2, duration_s=0.1, warmup_s=0.03, protocols=("okapi",))
    runs = run_experiment("fig5", plan, packaged_profile("python-server"))
    assert runs[0]["checked"] and runs[0]["anomalies"] == 0 and runs[0]["clients"] == 4
    assert not any(run["checked"] for run in runs[1:])
    runs = runs[1:]
    for p in (1, 2):
        sweep = [run for run in runs if run["rotx_partitions"] == p]
        assert [run["clients"] for run in sweep] == [4 * 2**step for step in range(len(sweep))]
        # a step out of a steady state ends the sweep, marked, and only the last step may be one
        ended = sweep[-1].get("steady") is False
        assert ended == (not steady(sweep[-1])) and all(steady(run) for run in sweep[:-1])
        measured = sweep[:-1] if ended else sweep
        growth = [b["throughput_ops_s"] / a["throughput_ops_s"] - 1 for a, b in pairwise(measured)]
        # it stops on its knee: FLAT_STEPS flat steps in a row, none before (or at its last step)
        flat = [g < PEAK_GROWTH for g in growth]
        assert not any(flat[i] and flat[i + 1] for i in range(len(flat) - FLAT_STEPS))
        assert flat[-FLAT_STEPS:] == [True] * FLAT_STEPS or len(sweep) == MAX_SWEEP_STEPS or ended
        assert all(run["latency_us"]["rotx"]["mean_us"] > 0 and run["server_stats"] for run in sweep)


def test_a_step_is_steady_when_littles_law_holds() -> None:
    """Closed-loop clients with no think time keep one operation each in flight: throughput x mean
    latency = clients in a steady state. A window whose operations complete in a burst breaks it."""
    def run(clients: int, ops_s: float, mean_us: float) -> dict[str, Any]:
        return {"clients": clients, "throughput_ops_s": ops_s, "latency_us": {"all": {"mean_us": mean_us}}}

    assert little_ratio(run(96, 80_130.0, 1_197.9)) == pytest.approx(1.0, abs=0.01)
    assert steady(run(96, 80_130.0, 1_197.9))
    # GentleRain at 2 partitions, 24,576 clients, RO-TXs of 0.6 s in a 0.8 s window: x1.45
    assert not steady(run(24_576, 56_975.0, 625_300.0))
    assert not steady(run(24_576, 30_000.0, 625_300.0))
    assert not steady(run(96, 0.0, 0.0)) and little_ratio(run(0, 0.0, 0.0)) == 0.0


def test_a_kept_peak_carries_its_sweeps_steps() -> None:
    """fig3 keeps each point's peak alone; its ``sweep`` says whether the sweep ended on a knee."""
    plan = Plan(dcs=2, partitions=2, duration_s=0.1, warmup_s=0.03, protocols=("okapi",), sweep_steps=3)
    runs = [run for run in run_experiment("fig3", plan, packaged_profile("python-server")) if not run["checked"]]
    assert runs and all(len(run["sweep"]) >= 2 for run in runs)
    for run in runs:
        assert [clients for clients, _ in run["sweep"]] == [run["sweep"][0][0] * 2**i for i in range(len(run["sweep"]))]
        assert max(ops for _, ops in run["sweep"]) == run["throughput_ops_s"]
        assert [run["clients"], run["throughput_ops_s"]] in run["sweep"]


def test_okapi_piggyback_is_okapi_with_the_usv_in_the_gsv_round() -> None:
    plan = Plan(dcs=2, partitions=2, protocols=("okapi", "okapi-piggyback"))
    piggyback = next(p for p in points("traffic", plan) if p.system == "okapi-piggyback")
    config = config_of(piggyback, plan, packaged_profile("python-quiet"), 4, checked=False)
    assert config.protocol == "okapi" and config.piggyback_usv
    plain = next(p for p in points("traffic", plan) if p.system == "okapi")
    assert not config_of(plain, plan, packaged_profile("python-quiet"), 4, checked=False).piggyback_usv


def test_every_systems_first_run_is_checked_and_labelled_with_its_name() -> None:
    plan = Plan(dcs=2, partitions=1, duration_s=0.1, warmup_s=0.03, clients_per_partition=2,
                protocols=("okapi", "okapi-piggyback"))
    runs = run_experiment("traffic", plan, packaged_profile("python-quiet"))
    assert [(run["system"], run["checked"]) for run in runs] == [
        ("okapi", True), ("okapi", False), ("okapi-piggyback", True), ("okapi-piggyback", False)]
    assert all(run["anomalies"] == 0 for run in runs)


def test_fig4_sweeps_the_rotx_levels_it_is_given() -> None:
    assert {p.rotx_partitions for p in points("fig4", Plan(partitions=32, rotx_levels=(1, 8)))} == {1, 8}
    assert {p.rotx_partitions for p in points("fig4", Plan(partitions=4, rotx_levels=(1, 8)))} == {1, 4}


def test_a_gentlerain_sweep_starts_higher_and_ends_on_its_knee() -> None:
    """GentleRain's throughput is its clients over its cycle (each RO-TX waits for the furthest DC)
    until the servers saturate: its sweep starts at as many times Okapi's clients as its cycle is
    longer than an Okapi RO-TX and PUT, and ends on two flat steps, not its last step."""
    assert sweep_start("okapi", 3) == sweep_start("okapi-piggyback", 3) == sweep_start("cure", 3) == 1
    assert sweep_start("gentlerain", 3) == 32 and sweep_start("gentlerain", 2) == 16  # 65 and 40 ms / 2 ms
    plan = Plan(dcs=2, partitions=1, duration_s=0.1, warmup_s=0.03, protocols=("okapi", "gentlerain"),
                rotx_levels=(1,), sweep_steps=2)
    runs = [run for run in run_experiment("fig4", plan, packaged_profile("python-quiet")) if not run["checked"]]
    okapi, gentlerain = runs[0], runs[2]
    assert (okapi["clients"], gentlerain["clients"]) == (2, 2 * 16)
    # about the same load at the start: GentleRain's many clients make up for its cycle
    assert 0.25 < gentlerain["throughput_ops_s"] / okapi["throughput_ops_s"] < 4


def test_a_runs_waits_bytes_and_cpu_are_counted_inside_its_measurement_window() -> None:
    """Cold start (the warm-up) and the end are left out of waits and bytes (``window_stats``), and
    each server's CPU share in the window is recorded, busiest and median (a hot server shows)."""
    from benchmarks.sim_experiments import run_from_record

    plan = Plan(dcs=2, partitions=2, duration_s=0.1, warmup_s=0.05, protocols=("cure",))
    point = next(p for p in points("traffic", plan))
    run = run_experiment("traffic", plan, packaged_profile("python-quiet"))[-1]
    assert not run["checked"] and point.system == "cure"
    whole = sum(sum(server["operations"].values()) for server in run["server_stats"])
    after, before = run["window_stats"]["after"], run["window_stats"]["before"]
    window = sum(sum(a["operations"].values()) - sum(b["operations"].values())
                 for a, b in zip(after, before, strict=True))
    assert 0 < window < whole
    summary = run_from_record(run)
    assert summary.waits is not None and summary.waits["rotx"].operations + summary.waits["write"].operations == window
    assert 0 < run["cpu"]["server_busy_median"] <= run["cpu"]["server_busy_max"] <= 1
