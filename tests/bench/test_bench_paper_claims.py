"""docs/paper.md and the committed paper results agree: the paper suite's summary is a function of
its runs (a search's peak replayed from its recorded steps), and the claims table docs/paper.md
carries is ``paper_claims.render`` of the committed results.json, row for row, with the column
``sim_claims.judge`` gives of the committed simulated results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from okapikv.bench.engine.results import Results
from okapikv.bench.suites.paper_claims import NOT, PARTLY, REPRODUCED, claims, render
from okapikv.bench.suites.paper_figures import summarize
from okapikv.bench.suites.sim_claims import SILENT, judge, load

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
    simulated = [claim.cell() for claim in judge(load(SIMULATED))]
    assert table == render(_committed(), simulated).strip()


def test_every_part_of_the_evaluation_has_a_claim_with_a_verdict() -> None:
    judged = claims(_committed())
    assert {claim.topic for claim in judged} == {"Fig. 3", "Fig. 4", "Fig. 4-5", "writes", "visibility", "metadata",
                                                 "communication"}
    assert all(claim.verdict in (REPRODUCED, PARTLY, NOT) and claim.why for claim in judged)


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


def test_cure_stall_against_the_skew_follows_the_rule_of_paper_claims() -> None:
    """Reproduced: grows at every step and within 3 ms of the largest in-DC skew; partly: grows, but
    far from it or not at every step; not: does not grow."""
    inside = {0.0: 0.0, 5.0: 4.1, 10.0: 8.3, 20.0: 16.6}
    near = _skew_claim(_skew_results({0.0: 0.2, 5.0: 4.0, 10.0: 7.9, 20.0: 15.0}, inside))
    assert near.verdict == REPRODUCED and "0 ms: 0.2 ms (0.0 ms)" in near.measured and "20 ms: 15.0 ms (16.6 ms)" in \
        near.measured
    far = _skew_claim(_skew_results({0.0: 0.2, 5.0: 9.0, 10.0: 14.0, 20.0: 25.0}, inside))
    assert far.verdict == PARTLY and "not within 3 ms" in far.why
    bumpy = _skew_claim(_skew_results({0.0: 0.2, 5.0: 5.0, 10.0: 4.0, 20.0: 15.0}, inside))
    assert bumpy.verdict == PARTLY and "not at every step" in bumpy.why
    flat = _skew_claim(_skew_results({0.0: 6.0, 5.0: 6.0, 10.0: 5.0, 20.0: 6.0}, inside))
    assert flat.verdict == NOT


def test_without_the_skew_sweep_the_cure_skew_row_says_so() -> None:
    results = _committed()
    results["paper"] = {**results["paper"], "skew": []}
    claim = _skew_claim(results)
    assert "the skew sweep (`paper-skew`) is not in these results" in claim.measured
    assert claim.verdict == PARTLY
    assert _skew_claim(_skew_results({}, {})).verdict == NOT


def test_gentlerain_row_counts_the_skew_sweep() -> None:
    """GentleRain's wait is for the furthest DC whatever the skew: the sweep's levels are judged
    with the RO-TX sweep's points."""
    results = _committed()
    rows = [{"system": "gentlerain", "clock_skew_ms": skew, "rotx_partitions": 4, "tx_probability": 1.0,
             "tx_mean_ms": 120.0} for skew in (0.0, 20.0)]
    results["paper"] = {**results["paper"], "skew": rows}
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert "skew sweep (p=4): 0 ms skew: 100% for 120.0 ms, 20 ms skew: 100% for 120.0 ms" in claim.measured
    rows[1]["tx_probability"] = 0.5
    [claim] = [claim for claim in claims(results) if claim.claim.startswith("GentleRain's RO-TX always waits")]
    assert claim.verdict == NOT
def test_the_simulated_column_has_a_verdict_for_every_claim_in_its_order() -> None:
    real = claims(_committed())
    simulated = judge(load(SIMULATED))
    assert [claim.topic for claim in simulated] == [claim.topic for claim in real]
    assert all(claim.verdict in (REPRODUCED, PARTLY, NOT, SILENT) and claim.why for claim in simulated)


def test_the_table_renders_without_simulated_results() -> None:
    plain = render(_committed())
    assert "simulated at the paper's scale" not in plain and plain.count("\n") == len(claims(_committed())) + 2
