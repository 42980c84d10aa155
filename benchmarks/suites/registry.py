"""The suites by the name ``--suite`` gives them (None: the custom run), and their report sections.

A suite is a function of the ``harness.harness.Bench`` it runs on, the number of runs it plans (for
the progress bar), and the systems it measures when ``--protocols`` is not given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.harness import Bench
from benchmarks.harness.options import BenchOptions
from benchmarks.suites import course, custom, fast, paper, paper_figures, resp, scaling
from okapikv.bench.engine import report


@dataclass(frozen=True, slots=True)
class Suite:
    run: Callable[[Bench], None]
    planned: Callable[[BenchOptions], int]
    default_protocols: str = "okapi"


SUITES: dict[str | None, Suite] = {
    None: Suite(custom.run, custom.planned),
    "course": Suite(course.run, course.planned),
    "paper": Suite(paper.run, paper.planned, "okapi,cure,gentlerain"),
    "fast": Suite(fast.run, fast.planned),
    "scaling": Suite(scaling.run, scaling.planned),
    "resp": Suite(resp.run, resp.planned),
}
#: The report sections of suites whose results have a section of their own.
SECTIONS: tuple[report.Section, ...] = (fast.SECTION, resp.SECTION, paper_figures.SECTION)


def planned_runs(options: BenchOptions) -> int:
    """How many measured runs an invocation makes (for the overall progress bar)."""
    return SUITES[options.suite].planned(options)


def write_outputs(results: dict[str, Any], out: Path, *, plots: bool = True) -> dict[str, list[str]]:
    """Every output of a serialized ``Results`` (a saved results.json too), every suite's section
    included: ``write_outputs(json.load(open(path)), out)`` redraws a committed report. (The
    figures import matplotlib: here, not with the module, so `okapi bench` can say first that the
    bench extra is missing.)"""
    from benchmarks.suites import paper_plots

    return report.write_outputs(results, out, sections=SECTIONS, figures=paper_plots.FIGURES, plots=plots)
