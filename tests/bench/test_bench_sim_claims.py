"""The verdict rules of ``sim_claims`` on synthetic simulated results (the committed ones are
checked against docs/paper.md in test_bench_paper_claims.py)."""

from __future__ import annotations

from typing import Any

from okapikv.bench.suites.paper_claims import NOT, PARTLY, REPRODUCED
from okapikv.bench.suites.sim_claims import FIVE_DC_TRAFFIC, SILENT, judge, source_spreads


def _run(system: str, *, clients: int = 96, partitions: int = 32, p: int = 2, w: float | None = None,
         ops: float = 1000.0, rotx_ms: float = 10.0, rotx_wait: tuple[float, float] = (0.0, 0.0),
         put_wait: float = 0.0, metadata: float = 12.0, stabilization: float = 1000.0) -> dict[str, Any]:
    return {
        "system": system, "clients": clients, "partitions": partitions, "rotx_partitions": p, "write_ratio": w,
        "clock_skew_ms": 10.0, "throughput_ops_s": ops,
        "latency_us": {"rotx": {"count": 10, "mean_us": rotx_ms * 1000}, "put": {"count": 10, "mean_us": 1000.0}},
        "waits": {"rotx": {"operations": 10, "probability": rotx_wait[0], "mean_us": rotx_wait[1] * 1000},
                  "write": {"operations": 10, "probability": put_wait, "mean_us": 0.0}},
        "traffic": {"metadata_bytes_per_update": metadata, "replication_bytes_per_s": 100.0,
                    "stabilization_bytes_per_s": stabilization, "heartbeat_bytes_per_s": 0.0},
    }


def _results(runs: list[dict[str, Any]], dcs: int = 3, **extra: Any) -> dict[str, Any]:
    return {"config": {"dcs": dcs}, "series": {"s": {"runs": runs}}, **extra}


def _fig3(okapi: float, cure: float, gentlerain: float) -> dict[str, Any]:
    runs = []
    for n, scale in ((2, 1), (32, 16)):
        for system, ops in (("okapi", okapi), ("cure", cure), ("gentlerain", gentlerain)):
            runs.append(_run(system, partitions=n, ops=ops * scale, clients=96))
            runs.append(_run(system, partitions=n, ops=ops * scale / 2, clients=48))  # a lower sweep step
    return _results(runs)


def test_fig3_throughput_rule() -> None:
    assert judge({"fig3": _fig3(1000, 990, 500)})[0].verdict == REPRODUCED
    assert judge({"fig3": _fig3(1000, 990, 1100)})[0].verdict == PARTLY
    assert judge({"fig3": _fig3(1000, 1500, 1100)})[0].verdict == NOT
    # the scaling row: 16x the partitions, 16x the peak
    assert judge({"fig3": _fig3(1000, 990, 500)})[3].verdict == REPRODUCED


def _fig4(cure_stalls: list[float], gentlerain: tuple[float, float]) -> dict[str, Any]:
    runs = []
    for p, stall in zip((1, 4, 16), cure_stalls, strict=True):
        runs.append(_run("okapi", p=p, rotx_ms=5.0))
        runs.append(_run("cure", p=p, rotx_ms=6.0, rotx_wait=(stall, 3.0)))
        runs.append(_run("gentlerain", p=p, rotx_ms=80.0, rotx_wait=gentlerain))
    return _results(runs)


def test_cure_and_gentlerain_stall_rules() -> None:
    rows = judge({"fig4": _fig4([0.1, 0.2, 0.4], (1.0, 70.0))})
    assert rows[6].verdict == REPRODUCED and "p=16: 40%" in rows[6].measured
    assert rows[7].verdict == PARTLY  # 3 ms, not 5-10 ms
    assert rows[8].verdict == REPRODUCED  # every RO-TX waits about the furthest DC's 65 ms
    assert rows[5].verdict == REPRODUCED  # both slower than Okapi at every step
    rows = judge({"fig4": _fig4([0.4, 0.2, 0.1], (0.5, 70.0))})
    assert rows[6].verdict == NOT and rows[8].verdict == PARTLY


def test_metadata_rules_and_the_other_dc_count() -> None:
    three = _results([_run("okapi"), _run("cure", metadata=28.0), _run("gentlerain")])
    rows = judge({"traffic": three})
    assert [rows[i].verdict for i in (13, 14, 15)] == [REPRODUCED, REPRODUCED, SILENT]
    five = _results([_run("okapi"), _run("cure", metadata=44.0), _run("gentlerain")], dcs=5)
    row = judge({"traffic": three, FIVE_DC_TRAFFIC: five})[15]
    assert row.verdict == REPRODUCED and "cure 28 / 44 B" in row.measured


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


def test_write_ratio_and_communication_rules() -> None:
    runs = []
    for w, cure_ops in ((0.1, 1000.0), (0.9, 800.0)):
        runs.append(_run("okapi", w=w, ops=1000.0, stabilization=3000.0))
        runs.append(_run("cure", w=w, ops=cure_ops, put_wait=w / 2, metadata=28.0, stabilization=2000.0))
        runs.append(_run("gentlerain", w=w, ops=1000.0, stabilization=500.0))
    rows = judge({"write-ratio": _results(runs)})
    assert rows[9].verdict == REPRODUCED and "w=0.9: 45%" in rows[9].measured  # widening with the PUT stalls
    assert rows[10].verdict == REPRODUCED
    assert rows[16].verdict == REPRODUCED and rows[18].verdict == REPRODUCED
    assert rows[17].verdict == PARTLY  # Okapi's share falls with writes but stays above Cure's


def test_without_simulated_results_every_row_says_so() -> None:
    rows = judge({})
    assert len(rows) == 19 and all(row.verdict == SILENT and row.why for row in rows)


def test_a_peak_at_the_sweeps_last_step_is_called_a_lower_bound() -> None:
    data = _fig3(1000, 990, 500)
    data["config"]["sweep_steps"] = 8
    for run in data["series"]["s"]["runs"]:
        if run["system"] == "gentlerain" and run["partitions"] == 32 and run["clients"] == 96:
            run["clients"], run["dcs"] = 32 * 3 * 128, 3
    measured = judge({"fig3": data})[0].measured
    assert "possibly below the peak: gentlerain at 32)" in measured
    data["config"]["sweep_steps"] = 9  # one step more: 12288 clients is not that sweep's last
    assert "possibly below" not in judge({"fig3": data})[0].measured


def test_gentlerain_cheapest_per_second_but_not_per_operation_is_partly() -> None:
    runs = []
    for w in (0.1, 0.9):
        runs += [_run("okapi", w=w, ops=1000.0, stabilization=3000.0),
                 _run("cure", w=w, ops=1000.0, stabilization=2000.0),
                 _run("gentlerain", w=w, ops=100.0, stabilization=500.0)]
    row = judge({"write-ratio": _results(runs)})[18]
    assert row.verdict == PARTLY and "lowest at 0 of 2 write ratios, its B/s at 2" in row.measured
