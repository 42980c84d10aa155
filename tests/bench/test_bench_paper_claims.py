"""docs/paper.md and the committed paper results agree: the paper suite's summary is a function of
its runs (a search's peak replayed from its recorded steps), and the claims table docs/paper.md
carries is ``paper_claims.render`` of the committed results.json, row for row, with the column
of the committed simulated results judged by the same table; the same measurements give the same
verdicts whichever source they came from."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.peak import PeakRule, find_peak
from benchmarks.suites.measurements import SIMULATED as SIMULATED_SOURCE
from benchmarks.suites.measurements import Sweep, from_real, from_simulated, load_simulated
from benchmarks.suites.paper_claims import (
    BY_CONSTRUCTION,
    CLAIMS,
    INCONCLUSIVE,
    NOT,
    PARTLY,
    REPRODUCED,
    SILENT,
    claims,
    judge,
    render,
)
from benchmarks.suites.paper_figures import lower_bound, summarize
from okapikv.bench.engine.results import Results

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "results" / "paper" / "results.json"
PAPER_MD = ROOT / "docs" / "paper.md"
SIMULATED = ROOT / "docs" / "results" / "simulated"
BEGIN, END = "<!-- claims: generated from docs/results/paper/results.json -->", "<!-- claims end -->"


def _committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(COMMITTED.read_text())
    return data


def test_the_committed_summary_is_a_function_of_the_committed_runs() -> None:
    saved = _committed()
    again = json.loads(json.dumps(summarize(Results.from_dict(saved))))
    assert again == saved["paper"]


def test_docs_paper_md_carries_the_claims_table_of_the_committed_results() -> None:
    text = PAPER_MD.read_text()
    assert BEGIN in text and END in text
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == render(from_real(_committed()), from_simulated(load_simulated(SIMULATED))).strip()


def test_every_part_of_the_evaluation_has_a_claim_with_a_verdict() -> None:
    judged = claims(_committed())
    assert {claim.topic for claim in judged} == {"Fig. 3", "Fig. 4", "Fig. 4-5", "writes", "visibility", "metadata",
                                                 "communication"}
    assert all(claim.verdict in (REPRODUCED, PARTLY, NOT, INCONCLUSIVE) and claim.why for claim in judged)


def _skew_results(stalls: dict[float, float], inside: dict[float, float]) -> dict[str, Any]:
    """A results dictionary whose paper section has only Cure's skew sweep: mean stall per
    transaction ``stalls[skew]`` and largest in-DC skew ``inside[skew]``, in ms."""
    rows = [{"system": "cure", "clock_skew_ms": skew, "clock_skew_model": "uniform", "max_dc_skew_ms": inside[skew],
             "rotx_partitions": 4, "sessions": 32, "throughput_ops_s": 500.0, "rotx_mean_ms": 20.0,
             "tx_probability": 0.5, "tx_mean_ms": stall, "slice_probability": 0.6, "slice_mean_ms": stall,
             "put_probability": 0.1, "put_mean_ms": 1.0} for skew, stall in stalls.items()]
    return {"config": {"paper_plan": {"clock_skew_ms": 10.0, "clock_skew_model": "uniform"}}, "series": {},
            "paper": {"peaks": [], "stalls": [], "skew": rows}}


def _skew_claim(results: dict[str, Any]) -> Any:
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("Cure's stall lasts about the clock skew")]
    return claim


def test_cure_stall_against_the_skew_is_judged_on_proportionality() -> None:
    """Reproduced: the stall per ms of skew within x1.5 over the levels and small at no skew;
    partly: grows, not in proportion or not at every step; not: does not grow."""
    inside = {0.0: 0.0, 5.0: 4.1, 10.0: 8.3, 20.0: 16.6}
    near = _skew_claim(_skew_results({0.0: 0.2, 5.0: 4.0, 10.0: 7.9, 20.0: 15.0}, inside))
    assert near.verdict == REPRODUCED and "0 ms: 0.2 ms (0.0 ms)" in near.measured and "20 ms: 15.0 ms (16.6 ms)" in \
        near.measured
    offset = _skew_claim(_skew_results({0.0: 3.0, 5.0: 9.0, 10.0: 10.0, 20.0: 12.0}, inside))
    assert offset.verdict == PARTLY and "not in proportion" in offset.why
    bumpy = _skew_claim(_skew_results({0.0: 0.2, 5.0: 5.0, 10.0: 4.0, 20.0: 15.0}, inside))
    assert bumpy.verdict == PARTLY and "not at every step" in bumpy.why
    flat = _skew_claim(_skew_results({0.0: 6.0, 5.0: 6.0, 10.0: 5.0, 20.0: 6.0}, inside))
    assert flat.verdict == NOT


def _peaks_results(okapi: float, cure: float, gentlerain: float, *, capped: str = "") -> dict[str, Any]:
    """A paper section of scalability peaks at 1 and 2 partitions; ``capped``'s are lower bounds."""
    peaks = [{"series": "paper-scalability", "system": system, "partitions": n, "rotx_partitions": 2,
              "write_ratio": None, "sessions": 64, "throughput_ops_s": ops * n, "rotx_mean_ms": 10.0,
              "put_mean_ms": 1.0, "lower_bound": system == capped}
             for n in (1, 2) for system, ops in (("okapi", okapi), ("cure", cure), ("gentlerain", gentlerain))]
    return {"config": {}, "series": {}, "paper": {"peaks": peaks}}


def test_a_peak_at_its_session_cap_is_a_lower_bound_and_judged_inconclusive() -> None:
    rule = PeakRule(8, 32, 250.0)
    growing = find_peak(lambda sessions: (float(sessions), 1.0, sessions), rule)
    assert growing.stopped_by == "sessions" and lower_bound(growing)
    knee = find_peak(lambda sessions: (min(sessions, 16) * 1.0, 1.0, sessions), PeakRule(8, 64, 250.0))
    assert knee.stopped_by == "growth" and not lower_bound(knee)
    [row] = [claim for claim in claims(_peaks_results(1000, 990, 600, capped="gentlerain"))
             if claim.claim.startswith("Okapi's peak throughput")]
    assert row.verdict == INCONCLUSIVE and "gentlerain at partitions 1" in row.why
    [row] = [claim for claim in claims(_peaks_results(1000, 990, 600)) if claim.claim.startswith("Okapi's peak")]
    assert row.verdict == REPRODUCED


def test_real_throughput_uses_the_papers_sizes_as_bounds() -> None:
    [row] = [claim for claim in claims(_peaks_results(1000, 990, 300)) if claim.claim.startswith("Okapi's peak")]
    assert row.verdict == PARTLY and "outside x1.3-x2" in row.why  # x3.3 is not "50% higher"


def test_without_the_skew_sweep_the_cure_skew_row_says_so() -> None:
    results = _committed()
    results["paper"] = {**results["paper"], "skew": []}
    claim = _skew_claim(results)
    assert "the skew sweep (`paper-skew`) is not in these results" in claim.measured
    assert claim.verdict == PARTLY
    assert _skew_claim(_skew_results({}, {})).verdict == SILENT  # no Cure stalls: nothing to judge


def test_gentlerain_row_counts_the_skew_sweep() -> None:
    """GentleRain's wait is for the furthest DC whatever the skew: the sweep's levels (a moderate
    load, below saturation) are judged; the RO-TX sweep's peaks are shown."""
    results = _committed()
    rows = [{"system": "gentlerain", "clock_skew_ms": skew, "rotx_partitions": 4, "tx_probability": 1.0,
             "tx_mean_ms": 70.0} for skew in (0.0, 20.0)]
    results["paper"] = {**results["paper"], "skew": rows}
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert "skew sweep (p=4): 0 ms skew: 100% for 70.0 ms, 20 ms skew: 100% for 70.0 ms" in claim.measured
    assert claim.verdict == REPRODUCED  # judged on the sweep, below saturation
    rows[1]["tx_probability"] = 0.5
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert claim.verdict == PARTLY  # about the furthest DC's delay, not always
    rows[1]["tx_mean_ms"] = 300.0
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert claim.verdict == NOT
    results["paper"] = {**results["paper"], "skew": []}
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert claim.verdict == INCONCLUSIVE  # the peaks alone: a saturated machine's queueing
def test_the_simulated_column_has_a_verdict_for_every_claim_in_its_order() -> None:
    simulated = judge(from_simulated(load_simulated(SIMULATED)))
    assert [claim.claim for claim in simulated] == [row.claim for row in CLAIMS] and len(CLAIMS) == 19
    assert all(claim.verdict in (REPRODUCED, PARTLY, NOT, SILENT, INCONCLUSIVE, BY_CONSTRUCTION) and claim.why
               for claim in simulated)


def test_the_table_renders_without_simulated_results() -> None:
    plain = render(from_real(_committed()))
    assert "simulated at the paper's scale" not in plain and plain.count("\n") == len(CLAIMS) + 2


def test_a_verdict_depends_on_the_measurements_not_on_their_source() -> None:
    """The committed real measurements relabelled as simulated get the same verdicts."""
    real = from_real(_committed())
    assert [c.verdict for c in judge(replace(real, source=SIMULATED_SOURCE))] == [c.verdict for c in judge(real)]


def _sim_run(system: str, n: int, clients: int, ops: float) -> dict[str, Any]:
    return {"system": system, "partitions": n, "rotx_partitions": 2, "write_ratio": None, "clients": clients,
            "throughput_ops_s": ops, "latency_us": {"rotx": {"count": 10, "mean_us": 10_000.0},
                                                    "put": {"count": 10, "mean_us": 1000.0}},
            "cpu": {"server_busy_max": 0.5, "server_busy_median": 0.45}}


def test_the_same_peaks_give_the_same_verdicts_from_a_real_run_and_from_the_simulator() -> None:
    """Scalability peaks of the same figures, once as a paper-suite results.json and once as a
    simulated fig3 sweep (a lower step below each peak): the same record, the same verdicts."""
    shape = {"okapi": 1000.0, "cure": 990.0, "gentlerain": 500.0}
    real = {"config": {}, "series": {}, "paper": {"peaks": [
        {"series": "paper-scalability", "system": system, "partitions": n, "sessions": 48,
         "throughput_ops_s": ops * n, "rotx_mean_ms": 10.0, "put_mean_ms": 1.0, "lower_bound": False}
        for n in (2, 4) for system, ops in shape.items()]}}
    runs = [_sim_run(system, n, clients, ops * n * clients / 48) for n in (2, 4) for system, ops in shape.items()
            for clients in (24, 48)]
    simulated = {"fig3": {"config": {"dcs": 3, "duration_s": 1.0, "warmup_s": 0.2}, "series": {"s": {"runs": runs}}}}
    from_run, from_sim = from_real(real), from_simulated(simulated)

    def figures(peaks: Any) -> list[tuple[str, float, float, int | None, bool]]:
        return sorted((p.system, p.point, p.throughput_ops_s, p.load, p.lower_bound) for p in peaks)
    assert figures(from_run.scalability.peaks) == figures(from_sim.scalability.peaks)
    verdicts = [[claim.verdict for claim in judge(m)][:4] for m in (from_run, from_sim)]
    assert verdicts[0] == verdicts[1] == [REPRODUCED, NOT, NOT, REPRODUCED]


def test_each_claim_reads_only_the_measurements_it_names() -> None:
    """A row's ``reads`` is what its rule reads: blanking every other field changes nothing."""
    real = from_real(_committed())
    for row in CLAIMS:
        blank: dict[str, Any] = {}
        for field in fields(real):
            if field.name not in (*row.reads, "source"):
                value = getattr(real, field.name)
                blank[field.name] = Sweep(value.key) if isinstance(value, Sweep) else field.default
        assert row.rule(replace(real, **blank)) == row.rule(real), row.claim
