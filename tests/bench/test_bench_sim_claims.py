"""The claims table (``paper_claims.CLAIMS``) on synthetic simulated results, read by
``measurements.from_simulated`` (the committed ones are checked against docs/paper.md in
test_bench_paper_claims.py)."""

from __future__ import annotations

from typing import Any

from benchmarks.suites import paper_claims
from benchmarks.suites.measurements import FIVE_DC_TRAFFIC, from_simulated, source_spreads
from benchmarks.suites.paper_claims import BY_CONSTRUCTION, INCONCLUSIVE, NOT, PARTLY, REPRODUCED, SILENT, Claim


def judge(results: dict[str, dict[str, Any]]) -> list[Claim]:
    return paper_claims.judge(from_simulated(results))


def _run(system: str, *, clients: int = 96, partitions: int = 32, p: int = 2, w: float | None = None,
         ops: float = 1000.0, rotx_ms: float = 10.0, rotx_wait: tuple[float, float] = (0.0, 0.0),
         put_wait: float = 0.0, metadata: float = 12.0, stabilization: float = 1000.0, heartbeats: float = 0.0,
         busy: tuple[float, float] = (0.5, 0.45)) -> dict[str, Any]:
    return {
        "system": system, "clients": clients, "partitions": partitions, "rotx_partitions": p, "write_ratio": w,
        "clock_skew_ms": 10.0, "throughput_ops_s": ops,
        "latency_us": {"rotx": {"count": 10, "mean_us": rotx_ms * 1000}, "put": {"count": 10, "mean_us": 1000.0}},
        "waits": {"rotx": {"operations": 10, "probability": rotx_wait[0], "mean_us": rotx_wait[1] * 1000},
                  "write": {"operations": 10, "probability": put_wait, "mean_us": 0.0},
                  "write_skew": {"operations": 10, "probability": put_wait, "mean_us": 1000.0}},
        "traffic": {"metadata_bytes_per_update": metadata, "replication_bytes_per_s": 100.0,
                    "stabilization_bytes_per_s": stabilization, "heartbeat_bytes_per_s": heartbeats},
        "cpu": {"server_busy_max": busy[0], "server_busy_median": busy[1]},
    }


def _results(runs: list[dict[str, Any]], dcs: int = 3, **extra: Any) -> dict[str, Any]:
    """Results of runs measured over a 0.8 s window: ten GentleRain cycles and more."""
    return {"config": {"dcs": dcs, "duration_s": 1.0, "warmup_s": 0.2}, "series": {"s": {"runs": runs}}, **extra}


def _fig3(okapi: float, cure: float, gentlerain: float, growth: float = 16) -> dict[str, Any]:
    runs = []
    for n, scale in ((2, 1.0), (32, growth)):
        for system, ops in (("okapi", okapi), ("cure", cure), ("gentlerain", gentlerain)):
            runs.append(_run(system, partitions=n, ops=ops * scale, clients=96))
            runs.append(_run(system, partitions=n, ops=ops * scale / 2, clients=48))  # a lower sweep step
    return _results(runs)


def test_fig3_throughput_rule_has_the_papers_sizes_as_bounds() -> None:
    """"50% above GentleRain" is x1.3-x2, "slightly above Cure" within x0.95-x1.15."""
    assert judge({"fig3": _fig3(1000, 990, 500)})[0].verdict == REPRODUCED
    too_far = judge({"fig3": _fig3(1000, 990, 400)})[0]  # x2.5 over GentleRain: not "50%"
    assert too_far.verdict == PARTLY and "outside x1.3-x2" in too_far.why
    not_slightly = judge({"fig3": _fig3(1000, 800, 500)})[0]  # x1.25 over Cure: not "slightly"
    assert not_slightly.verdict == PARTLY and "beyond x1.15" in not_slightly.why
    assert judge({"fig3": _fig3(1000, 990, 1100)})[0].verdict == NOT
    assert judge({"fig3": _fig3(1000, 1500, 1100)})[0].verdict == NOT
    # the scaling row: 16x the partitions, 16x the peak
    assert judge({"fig3": _fig3(1000, 990, 500)})[3].verdict == REPRODUCED


def test_latency_rule_includes_put() -> None:
    data = _fig3(1000, 990, 500)
    for run in data["series"]["s"]["runs"]:
        run["latency_us"]["rotx"]["mean_us"] = {"okapi": 5000.0, "cure": 10000.0, "gentlerain": 80000.0}[run["system"]]
    assert judge({"fig3": data})[1].verdict == REPRODUCED
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain":
            run["latency_us"]["put"]["mean_us"] = 500.0  # GentleRain's PUTs faster than Okapi's
    row = judge({"fig3": data})[1]
    assert row.verdict == PARTLY and "PUT slower" in row.why


def test_no_simulated_verdict_from_a_short_window_old_runs_or_a_hot_server() -> None:
    short = _fig3(1000, 990, 500)
    short["config"].update(duration_s=0.2, warmup_s=0.05)  # 0.15 s: about two GentleRain cycles
    row = judge({"fig3": short})[0]
    assert row.verdict == INCONCLUSIVE and "fewer than 10" in row.why
    old = _fig3(1000, 990, 500)
    for run in old["series"]["s"]["runs"]:
        del run["cpu"]
    assert judge({"fig3": old})[0].verdict == INCONCLUSIVE
    hot = _fig3(1000, 990, 500)
    hot["series"]["s"]["runs"][0]["cpu"] = {"server_busy_max": 0.99, "server_busy_median": 0.4}
    row = judge({"fig3": hot})[0]
    assert row.verdict == INCONCLUSIVE and "hot server" in row.why
    hot["series"]["s"]["runs"][0]["cpu"] = {"server_busy_max": 0.7, "server_busy_median": 0.4}  # not saturated
    assert judge({"fig3": hot})[0].verdict == REPRODUCED


def _fig4(cure_stalls: list[float], gentlerain: tuple[float, float]) -> dict[str, Any]:
    runs = []
    for p, stall in zip((1, 4, 16), cure_stalls, strict=True):
        runs.append(_run("okapi", p=p, rotx_ms=5.0))
        runs.append(_run("cure", p=p, rotx_ms=8.0, rotx_wait=(stall, 3.0)))
        runs.append(_run("gentlerain", p=p, rotx_ms=80.0, rotx_wait=gentlerain))
    return _results(runs)


def test_cure_and_gentlerain_stall_rules() -> None:
    rows = judge({"fig4": _fig4([0.1, 0.2, 0.4], (1.0, 70.0))})
    assert rows[6].verdict == REPRODUCED and "p=16: 40%" in rows[6].measured
    assert rows[7].verdict == PARTLY and "one skew" in rows[7].measured  # proportionality needs a sweep
    assert rows[8].verdict == REPRODUCED  # every RO-TX waits about the furthest DC's 65 ms, below saturation
    assert rows[5].verdict == REPRODUCED  # both x1.5 and more slower than Okapi at every step
    rows = judge({"fig4": _fig4([0.4, 0.2, 0.1], (0.5, 70.0))})
    assert rows[6].verdict == NOT and rows[8].verdict == PARTLY


def test_cures_stall_probability_is_judged_below_saturation() -> None:
    """Row 7 reads each p's first sweep step, where a wait is the protocol's: at a saturated peak a
    slice's queue also lets the clock pass the snapshot, which hides the stall."""
    def fig4(below: list[float], peaks: list[float]) -> dict[str, Any]:
        runs = []
        for p, first, peak in zip((1, 4, 16), below, peaks, strict=True):
            runs.append(_run("cure", p=p, clients=96, ops=100.0, rotx_wait=(first, 3.0)))
            runs.append(_run("cure", p=p, clients=3072, ops=1000.0, rotx_wait=(peak, 3.0)))
        return _results(runs)

    row = judge({"fig4": fig4([0.55, 0.87, 0.95], [0.02, 0.0, 0.01])})[6]
    assert row.verdict == REPRODUCED and "below saturation" in row.why
    assert "each p's first step (96 clients)" in row.measured and "at the peaks" in row.measured
    assert judge({"fig4": fig4([0.55, 0.96, 0.95], [0.0, 0.0, 0.0])})[6].verdict == REPRODUCED  # 1 point: noise
    assert judge({"fig4": fig4([0.55, 0.95, 0.85], [0.0, 0.0, 0.0])})[6].verdict == PARTLY
    assert judge({"fig4": fig4([0.55, 0.50, 0.40], [0.02, 0.2, 0.4])})[6].verdict == NOT


def test_rotx_latency_is_compared_at_equal_throughput() -> None:
    """Row 6 ("for any value of throughput", Fig. 5): at each of Okapi's steps' throughput, the
    others' latency on their own curves, linear between their steps. Cure here needs twice Okapi's
    clients for a throughput: at equal clients its latency is x1.2, at equal throughput x1.9-3.8."""
    runs = []
    for clients, ops, ms in ((96, 100.0, 1.0), (192, 200.0, 1.0)):
        runs.append(_run("okapi", p=1, clients=clients, ops=ops, rotx_ms=ms))
    for clients, ops, ms in ((96, 50.0, 1.2), (192, 100.0, 1.9), (384, 200.0, 3.8), (768, 150.0, 9.0)):
        runs.append(_run("cure", p=1, clients=clients, ops=ops, rotx_ms=ms))
    for clients, ops, ms in ((96, 40.0, 70.0), (384, 160.0, 75.0), (768, 240.0, 90.0)):
        runs.append(_run("gentlerain", p=1, clients=clients, ops=ops, rotx_ms=ms))
    row = judge({"fig4": _results(runs)})[5]
    # Cure at 100 ops/s: its step (1.9); at 200: its peak step (3.8), the step past its peak left out.
    # GentleRain at 100: 70 + 5 x 60/120 = 72.5 ms; at 200: 75 + 15 x 40/80 = 82.5 ms
    assert "2 of Okapi's steps" in row.measured and "Cure / Okapi x1.90 to x3.80" in row.measured
    assert "GentleRain / Okapi x72.50 to x82.50" in row.measured and row.verdict == REPRODUCED
    # a throughput a curve does not reach gives no cell
    assert judge({"fig4": _results([r for r in runs if not (r["system"] == "cure" and r["clients"] >= 384)])}
                 )[5].measured.startswith("at the same p and throughput (1 of")


def test_considerably_is_at_least_x1_5() -> None:
    data = _fig4([0.1, 0.2, 0.4], (1.0, 70.0))
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "cure":
            run["latency_us"]["rotx"]["mean_us"] = 6000.0  # x1.2 over Okapi's 5 ms
    row = judge({"fig4": data})[5]
    assert row.verdict == PARTLY and "not considerably" in row.why


def test_gentlerain_waits_are_judged_below_saturation() -> None:
    """At each p's first sweep step, not at its peak."""
    data = _fig4([0.1, 0.2, 0.4], (0.3, 200.0))  # the peaks: a saturated machine's queueing
    data["series"]["s"]["runs"] += [_run("gentlerain", p=p, clients=96 // 2, rotx_ms=70.0, rotx_wait=(1.0, 70.0))
                                    for p in (1, 4, 16)]
    row = judge({"fig4": data})[8]
    assert row.verdict == REPRODUCED and "first sweep step" in row.measured


def test_metadata_rules_and_the_other_dc_count() -> None:
    three = _results([_run("okapi"), _run("cure", metadata=28.0), _run("gentlerain")])
    rows = judge({"traffic": three})
    assert [rows[i].verdict for i in (13, 14, 15)] == [BY_CONSTRUCTION, BY_CONSTRUCTION, SILENT]
    five = _results([_run("okapi"), _run("cure", metadata=44.0), _run("gentlerain")], dcs=5)
    row = judge({"traffic": three, FIVE_DC_TRAFFIC: five})[15]
    assert row.verdict == BY_CONSTRUCTION and "cure 28 / 44 B" in row.measured


def _pair(source: str, destination: str, mean: float) -> dict[str, Any]:
    return {"source": source, "destination": destination, "count": 10, "mean_ms": mean, "p50_ms": mean}


def test_visibility_rules() -> None:
    visibility = {
        "okapi": [_pair("a", "c", 200), _pair("b", "c", 260)],
        "cure": [_pair("a", "c", 150), _pair("b", "c", 190)],
        "gentlerain": [_pair("a", "c", 100), _pair("b", "c", 102)],
    }
    rows = judge({"visibility": _results([], visibility=visibility)})
    assert rows[11].verdict == REPRODUCED and rows[12].verdict == REPRODUCED
    assert source_spreads(visibility["okapi"]) == [60]
    visibility["okapi"] = [_pair("a", "c", 100), _pair("b", "c", 100)]
    rows = judge({"visibility": _results([], visibility=visibility)})
    assert rows[11].verdict == NOT and rows[12].verdict == PARTLY


def test_visibility_order_does_not_demand_cure_above_gentlerain() -> None:
    visibility = {"okapi": [_pair("a", "c", 200)], "cure": [_pair("a", "c", 90)], "gentlerain": [_pair("a", "c", 100)]}
    row = judge({"visibility": _results([], visibility=visibility)})[11]
    assert row.verdict == REPRODUCED and "then GentleRain, then Cure" in row.why


def test_write_ratio_and_communication_rules() -> None:
    runs = []
    for w, cure_ops in ((0.1, 1000.0), (0.9, 800.0)):
        runs.append(_run("okapi", w=w, ops=1000.0, stabilization=3000.0))
        runs.append(_run("cure", w=w, ops=cure_ops, put_wait=w / 2, metadata=28.0, stabilization=2000.0))
        runs.append(_run("gentlerain", w=w, ops=1000.0, stabilization=500.0))
    rows = judge({"write-ratio": _results(runs)})
    assert rows[9].verdict == REPRODUCED and "w=0.9: 45% /" in rows[9].measured  # widening, skew stalls growing
    assert rows[10].verdict == REPRODUCED
    assert rows[16].verdict == REPRODUCED and rows[18].verdict == REPRODUCED
    assert rows[17].verdict == PARTLY  # Okapi's share falls with writes but stays above Cure's


def test_comparable_to_gentlerain_is_judged_at_every_write_ratio() -> None:
    runs = []
    for w, okapi in ((0.05, 950.0), (0.1, 960.0), (0.9, 800.0)):
        runs += [_run("okapi", w=w, ops=okapi), _run("cure", w=w), _run("gentlerain", w=w, ops=1000.0)]
    row = judge({"write-ratio": _results(runs)})[10]
    assert row.verdict == PARTLY and "read-heavy" in row.why  # within 10% where reads dominate, not at w=0.9
    runs[-3]["throughput_ops_s"] = 950.0
    assert judge({"write-ratio": _results(runs)})[10].verdict == REPRODUCED


def test_without_simulated_results_every_row_says_so() -> None:
    rows = judge({})
    assert len(rows) == 19 and all(row.verdict == SILENT and row.why for row in rows)


def test_a_peak_at_the_sweeps_last_step_is_a_lower_bound_and_inconclusive() -> None:
    data = _fig3(1000, 990, 500)
    data["config"]["sweep_steps"] = 8
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain" and run["partitions"] == 32 and run["clients"] == 96:
            run["clients"], run["dcs"] = 32 * 3 * 128, 3
    row = judge({"fig3": data})[0]
    assert "gentlerain at partitions 32)" in row.why and row.verdict == INCONCLUSIVE
    data["config"]["sweep_steps"] = 9  # one step more: 12288 clients is not that sweep's last
    row = judge({"fig3": data})[0]
    assert row.verdict == REPRODUCED
    data["config"]["sweep_steps"] = 8  # a GentleRain sweep starting at 32 clients per partition of each DC
    data["config"]["sweep_start"] = {"gentlerain": 32}
    assert judge({"fig3": data})[0].verdict == REPRODUCED


def test_a_peak_at_the_sweeps_last_step_after_a_flat_step_is_a_knee() -> None:
    """The sweep's steps kept on the peak (``sweep``) tell a knee from a peak still growing: a top
    step less than 5% above the step below ends a flat sweep; 5% or more is a lower bound."""
    data = _fig3(1000, 990, 500)
    data["config"]["sweep_steps"] = 8
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain" and run["partitions"] == 32 and run["clients"] == 96:
            run["clients"], run["dcs"] = 32 * 3 * 128, 3
            run["sweep"] = [[32 * 3 * 64, run["throughput_ops_s"] * 0.99], [run["clients"], run["throughput_ops_s"]]]
            grown = run
    assert judge({"fig3": data})[0].verdict == REPRODUCED
    grown["sweep"][0][1] = grown["throughput_ops_s"] / 1.05
    row = judge({"fig3": data})[0]
    assert "gentlerain at partitions 32)" in row.why and row.verdict == INCONCLUSIVE


def test_a_peak_before_a_step_out_of_a_steady_state_is_a_lower_bound_when_still_growing() -> None:
    """A sweep that a step out of a steady state ended (``okapikv.sim.experiments.steady``) measured
    no capacity past its last steady step: a peak there still growing 5% or more is a lower bound,
    and the unsteady step itself is no peak, however many operations its window counted."""
    data = _fig3(1000, 990, 500)
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain" and run["partitions"] == 32 and run["clients"] == 96:
            run["sweep"] = [[48, run["throughput_ops_s"] * 0.99], [run["clients"], run["throughput_ops_s"]]]
            grown = run
    assert judge({"fig3": data})[0].verdict == REPRODUCED
    grown["unsteady"] = [grown["clients"] * 2, grown["throughput_ops_s"] * 3, 1.45]
    assert judge({"fig3": data})[0].verdict == REPRODUCED  # a flat step below: the knee
    # a steady step above the peak, lower, then the unsteady one: the knee, however the peak grew
    grown["sweep"] = [[48, grown["throughput_ops_s"] / 2], [96, grown["throughput_ops_s"]],
                      [192, grown["throughput_ops_s"] * 0.8]]
    assert judge({"fig3": data})[0].verdict == REPRODUCED
    grown["sweep"] = grown["sweep"][:2]
    grown["sweep"][0][1] = grown["throughput_ops_s"] / 1.06
    row = judge({"fig3": data})[0]
    assert "gentlerain at partitions 32)" in row.why and row.verdict == INCONCLUSIVE
    # the same sweep with every step kept (``keep="all"``, the step below at half the throughput):
    # the unsteady run is marked, and is no peak
    del grown["sweep"], grown["unsteady"]
    assert judge({"fig3": data})[0].verdict == REPRODUCED
    data["series"]["s"]["runs"].append({**grown, "clients": grown["clients"] * 2,
                                        "throughput_ops_s": grown["throughput_ops_s"] * 3, "steady": False})
    row = judge({"fig3": data})[0]
    assert "gentlerain at partitions 32)" in row.why and row.verdict == INCONCLUSIVE


def test_a_baselines_lower_bound_past_okapis_knee_counts_as_needing_more_clients() -> None:
    """Row 3: a GentleRain peak that is a lower bound at more clients than Okapi's knee already says
    its knee needs more; one at no more clients than Okapi's could go either way."""
    data = _fig3(1000, 990, 500)
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain" and run["clients"] == 96:
            run["clients"] = 192
            run["sweep"] = [[96, run["throughput_ops_s"] / 2], [192, run["throughput_ops_s"]]]
            run["unsteady"] = [384, run["throughput_ops_s"] * 3, 1.4]
            grown = run
    row = judge({"fig3": data})[2]
    assert row.verdict == PARTLY and "GentleRain needs more" in row.why  # Cure's knees at Okapi's clients
    grown["clients"], grown["sweep"] = 96, [[48, grown["throughput_ops_s"] / 2], [96, grown["throughput_ops_s"]]]
    row = judge({"fig3": data})[2]
    assert row.verdict == INCONCLUSIVE and "gentlerain at partitions" in row.why


def test_stabilization_rows_leave_heartbeats_out() -> None:
    """Rows 17 and 19: the stabilization protocol's bytes per second, whatever the heartbeats add."""
    runs = []
    for w in (0.1, 0.9):
        runs += [_run("okapi", w=w, ops=1000.0, stabilization=3000.0),
                 _run("cure", w=w, ops=1000.0, stabilization=2000.0),
                 _run("gentlerain", w=w, ops=100.0, stabilization=500.0, heartbeats=50_000.0)]
    rows = judge({"write-ratio": _results(runs)})
    assert rows[16].verdict == REPRODUCED and "without heartbeats" in rows[16].measured
    assert rows[18].verdict == REPRODUCED and "the lowest at 2 of 2" in rows[18].measured


def test_scaling_is_judged_against_linear() -> None:
    """Row 4: 16x the partitions: within 75% of x16 reproduces, a gain over x1.5 only partly."""
    assert judge({"fig3": _fig3(1000, 990, 500, growth=12)})[3].verdict == REPRODUCED
    row = judge({"fig3": _fig3(1000, 990, 500, growth=4)})[3]
    assert row.verdict == PARTLY and "less than linearly" in row.why
    assert judge({"fig3": _fig3(1000, 990, 500, growth=1.2)})[3].verdict == NOT


def test_stabilization_below_cures_is_not_the_costlier() -> None:
    """Row 17: above Cure's and GentleRain's reproduces, above Cure's alone partly, else not."""
    def row(okapi: float) -> str:
        runs = []
        for w in (0.1, 0.9):
            runs += [_run("okapi", w=w, stabilization=okapi), _run("cure", w=w, stabilization=2000.0),
                     _run("gentlerain", w=w, stabilization=2500.0)]
        return judge({"write-ratio": _results(runs)})[16].verdict
    assert [row(3000.0), row(2200.0), row(1000.0)] == [REPRODUCED, PARTLY, NOT]


def test_more_clients_for_one_of_the_baselines_is_partly() -> None:
    """Row 3: Cure alone peaking at more clients than Okapi is part of the claim, as GentleRain alone is."""
    runs = []
    for n in (2, 32):
        for system, peak_at in (("okapi", 48), ("cure", 96), ("gentlerain", 48)):
            runs += [_run(system, partitions=n, clients=clients, ops=1000.0 if clients == peak_at else 900.0)
                     for clients in (48, 96)]
    row = judge({"fig3": _results(runs)})[2]
    assert row.verdict == PARTLY and "Cure needs more clients" in row.why
