"""Redraw docs/results/paper from a paper-suite results.json, and docs/paper.md's claims table.

    python scripts/redraw_paper.py [RESULTS_JSON]    # default: docs/results/paper/results.json

The paper section (``benchmarks.suites.paper_figures.summarize``) is a function of the runs, so
a saved results.json gives it again with the current code; the claims table docs/paper.md carries
is ``paper_claims.render`` of the committed results and of the simulated results under
docs/results/simulated, one table judged on both (``measurements.from_real``,
``measurements.from_simulated``; ``tests/bench/test_bench_paper_claims.py`` checks it), and the
blocking-cost table beside it: the claims that depend on what a blocked request costs
(``paper_claims.BLOCKING_ROWS``), judged by the same rules on the simulated runs of each blocking
model under docs/results/simulated/blocking (one folder per model: ``blocking_models``). Run it
after changing how the section or the claims are computed, or to publish a run written elsewhere
(``okapi bench --suite paper --out DIR``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.suites.measurements import Measurements, cost_model, from_real, from_simulated, load_simulated
from benchmarks.suites.paper_claims import render, render_models
from benchmarks.suites.paper_figures import summarize
from benchmarks.suites.registry import write_outputs
from okapikv.bench.engine.results import Results

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "results" / "paper"
PAPER_MD = ROOT / "docs" / "paper.md"
SIMULATED = ROOT / "docs" / "results" / "simulated"
BEGIN, END = "<!-- claims: generated from docs/results/paper/results.json -->", "<!-- claims end -->"
BLOCKING = SIMULATED / "blocking"
BLOCKING_BEGIN = "<!-- blocking: generated from docs/results/simulated/blocking -->"
BLOCKING_END = "<!-- blocking end -->"


def blocking_models(folder: Path = BLOCKING) -> list[tuple[str, Measurements]]:
    """Each blocking model's simulated runs under ``folder`` (a folder per model, in name order),
    labelled by the cost model they ran under (``measurements.cost_model``)."""
    models = []
    for model in sorted(path for path in folder.iterdir() if path.is_dir()) if folder.is_dir() else []:
        results = load_simulated(model)
        if results:
            models.append((f"{model.name}: {cost_model(results)}", from_simulated(results)))
    return models


def between(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between the markers ``begin`` and ``end`` replaced by ``body``."""
    head, rest = text.split(begin, 1)
    return head + begin + "\n" + body + end + rest.split(end, 1)[1]


def main(source: Path) -> None:
    results = Results.from_dict(json.loads(source.read_text()))
    results.paper = summarize(results)
    data = results.to_dict()
    data.pop("files", None)
    if source.resolve().parent != OUT.resolve():
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir(parents=True)
    write_outputs(data, OUT)
    saved = json.loads((OUT / "results.json").read_text())
    table = render(from_real(saved), from_simulated(load_simulated(SIMULATED)))
    text = between(PAPER_MD.read_text(), BEGIN, END, table)
    models = blocking_models()
    PAPER_MD.write_text(between(text, BLOCKING_BEGIN, BLOCKING_END, render_models(models) if models else ""))
    print(f"redrew {OUT} and the claims table of {PAPER_MD}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT / "results.json")
