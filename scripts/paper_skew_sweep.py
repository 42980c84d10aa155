"""Run the paper suite's clock-skew sweep alone and merge it into a paper-suite results.json.

    python scripts/paper_skew_sweep.py RESULTS_JSON [okapi bench options ...]
    # e.g. python scripts/paper_skew_sweep.py docs/results/paper/results.json --duration-s 3 --warmup-s 1

The sweep is ``benchmarks.suites.paper._skew_sweep`` (a fresh cluster per skew level and system,
RO-TX over every partition + PUT at the plan's sessions), run here without loading the store: a
Cure or GentleRain slice waits for the clock before it reads a key
(``okapikv.core.reads.SnapshotReads.on_slice``), so the stall does not depend on the data, and
loading 10,000 records one write per clock microsecond costs minutes per cluster. The runs replace
the file's ``paper-skew`` series, the plan is recorded in ``config.paper_plan.skew_sweep`` with
``loaded: false``, a note says when and how they were measured, and the paper summary is
recomputed; then ``python scripts/redraw_paper.py RESULTS_JSON`` redraws the report and
docs/paper.md.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its benchmarks/ lab

from benchmarks.cli import options_from_args
from benchmarks.harness.harness import open_bench
from benchmarks.suites import paper, paper_figures
from okapikv.bench.engine.results import Results
from okapikv.cli import build_parser


def main(argv: list[str]) -> int:
    target = Path(argv[0])
    args = build_parser().parse_args(["bench", "--suite", "paper", "--no-progress", *argv[1:]])
    options = options_from_args(args)
    plan = dataclasses.replace(paper.paper_plan(options), skew_load=False)
    measured = Results(config={})
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open_bench(options, measured, len(plan.skew_levels) * len(options.systems)) as bench:
        paper._skew_sweep(bench, plan)
    sweep = measured.series.get("paper-skew")
    if sweep is None or not sweep.runs:
        print("paper_skew_sweep: no run completed", file=sys.stderr)
        return 1
    data = json.loads(target.read_text())
    results = Results.from_dict(data)
    results.series["paper-skew"] = sweep
    results.config.setdefault("paper_plan", {})["skew_sweep"] = {
        "clock_skew_ms": list(plan.skew_levels), "sessions": plan.skew_sessions,
        "rotx_partitions": plan.partitions, "loaded": False, "systems": None}
    results.note(f"paper-skew measured separately ({started}, scripts/paper_skew_sweep.py "
                 f"{' '.join(argv[1:])}; the clusters not loaded) and merged into this file")
    results.paper = paper_figures.summarize(results)
    target.write_text(json.dumps(results.to_dict(), indent=2) + "\n")
    print(f"paper_skew_sweep: {len(sweep.runs)} runs merged into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
