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


def test_the_simulated_column_has_a_verdict_for_every_claim_in_its_order() -> None:
    real = claims(_committed())
    simulated = judge(load(SIMULATED))
    assert [claim.topic for claim in simulated] == [claim.topic for claim in real]
    assert all(claim.verdict in (REPRODUCED, PARTLY, NOT, SILENT) and claim.why for claim in simulated)


def test_the_table_renders_without_simulated_results() -> None:
    plain = render(_committed())
    assert "simulated at the paper's scale" not in plain and plain.count("\n") == len(claims(_committed())) + 2
