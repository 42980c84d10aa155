"""The typed results and their one serialized form: results.json as the committed reports hold it.

Every committed docs/results/*/results.json reads back into ``Results`` and writes out as it was
(a section an older file lacks comes back empty); a run made in code has the fields, in the order,
that the CSVs and the report read; the fast suite's figures round-trip and its acceptance table
judges the committed full run exactly as that run was judged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.suites.acceptance import judge
from benchmarks.suites.fast_figures import FastFigures
from benchmarks.suites.registry import write_outputs
from okapikv.bench.engine.results import (
    Cpu,
    LatencySummary,
    MemoryRow,
    Results,
    Run,
    TrafficSummary,
    VisibilityPair,
    WaitSummary,
)

COMMITTED = sorted((Path(__file__).resolve().parents[2] / "docs" / "results").glob("*/results.json"))
#: A run's keys in results.json, in order (the CSV columns follow them).
RUN_KEYS = ("system", "workload", "clients", "processes", "dcs", "partitions", "clock_skew_ms", "rotx_partitions",
            "write_ratio", "load", "records", "duration_s", "warmup_s", "operations", "throughput_ops_s", "errors",
            "last_error", "latency_us", "cpu", "waits", "traffic", "server_operations")
TOP_KEYS = ("okapikv_version", "started_at", "elapsed_s", "config", "machine", "series", "visibility", "memory",
            "fast", "resp", "paper", "notes", "timings_s")


def _saved(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_every_committed_suite_is_there() -> None:
    assert {path.parent.name for path in COMMITTED} == {
        "course", "fast", "fast-full", "fast-paired", "fast-paired-base", "fast-quiet", "fast-quiet-894529a",
        "fast-quiet-41f0d47", "fast-quiet-41f0d47-compiled", "fast-quiet-c0c14da", "fast-quiet-fb2ee53",
        "fast-quiet-f9a1ddf", "paper", "resp", "scaling"}


@pytest.mark.parametrize("path", COMMITTED, ids=[path.parent.name for path in COMMITTED])
def test_committed_results_round_trip(path: Path) -> None:
    saved = _saved(path)
    again = Results.from_dict(saved).to_dict()
    assert again == {"visibility": {}, "memory": [], "fast": {}, "resp": [], "paper": {}, **saved}
    assert [key for key in again if key != "files"] == list(TOP_KEYS)


def _run(**changes: Any) -> Run:
    fields: dict[str, Any] = dict(
        system="okapi", workload="ycsb-a", clients=4, processes=1, dcs=1, partitions=1, clock_skew_ms=0.0,
        rotx_partitions=None, write_ratio=None, load="client", records=100, duration_s=1.0, warmup_s=0.1,
        operations=50, throughput_ops_s=50.0, errors={}, last_error="",
        latency_us={"all": LatencySummary(50, 10.0, 9.0, 20.0, 30.0, 40.0)},
        cpu=Cpu(0.5, 0.5, 0.4, 0.4, 8000.0),
        waits={"write": WaitSummary(25, 0, 0.0, 0.0, 0, {})},
        traffic=TrafficSummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), server_operations={"get": 25, "swap": 25},
    )
    fields.update(changes)
    return Run(**fields)


def test_a_run_has_the_shape_the_csvs_and_report_read() -> None:
    run = _run()
    assert tuple(run.to_dict()) == RUN_KEYS
    assert Run.from_dict(run.to_dict()) == run
    # without server stats (Redis) and without a load generator's name (older files): keys left out
    bare = _run(waits=None, traffic=None, server_operations=None, load=None)
    assert tuple(bare.to_dict()) == tuple(key for key in RUN_KEYS
                                          if key not in ("load", "waits", "traffic", "server_operations"))
    assert Run.from_dict(bare.to_dict()) == bare


def test_results_made_in_code_round_trip_through_json() -> None:
    results = Results(config={"suite": None, "protocols": ["okapi"]})
    results.series_for("custom", "clients", "A: clients sweep").runs.append(_run())
    results.visibility["okapi"] = [VisibilityPair("a", "b", 2, 0, 1.5, 1.0, 2.0, 2.0, 2.0, [1.0, 2.0])]
    results.memory.append(MemoryRow("okapi", 10, 8, 8, 10, 10, 1000, 2000, 2000, 100.0, 200.0, 0.5, 20.0))
    results.note("a note")
    results.add_time("runs_s", 1.0)
    saved = json.loads(json.dumps(results.to_dict()))
    assert Results.from_dict(saved).to_dict() == saved
    assert saved["series"]["custom"]["runs"][0]["latency_us"]["all"]["p999_us"] == 30.0
    assert saved["memory"][0]["bytes_per_key"] == 100.0 and saved["visibility"]["okapi"][0]["samples_ms"] == [1.0, 2.0]


def test_the_fast_figures_round_trip_and_the_table_judges_the_committed_run_as_it_was_judged() -> None:
    [path] = [path for path in COMMITTED if path.parent.name == "fast"]
    saved = _saved(path)
    figures = FastFigures.from_dict(saved["fast"])
    again = figures.to_dict()
    assert list(again) == list(saved["fast"])
    assert {key: value for key, value in again.items() if key != "targets"} == {
        key: value for key, value in saved["fast"].items() if key != "targets"}
    verdicts = judge(figures, Results.from_dict(saved).memory)
    assert [(row.target, row.goal, row.measured, row.met) for row in verdicts] == [
        (row["target"], row["goal"], row["measured"], row["met"]) for row in saved["fast"]["targets"]]


@pytest.mark.parametrize("path", COMMITTED, ids=[path.parent.name for path in COMMITTED])
def test_a_committed_report_is_redrawn_from_its_results(path: Path, tmp_path: Path) -> None:
    saved = _saved(path)
    files = write_outputs(saved, tmp_path, plots=False)
    assert files["csv"] == [name for name in saved["files"]["csv"]]
    report = (tmp_path / "report.md").read_text()
    committed = (path.parent / "report.md").read_text()
    # the same report but for the plots (not drawn here) and this redraw's own timing

    def kept(text: str) -> list[str]:
        return [line for line in text.splitlines() if line and not line.startswith(("![", "- ", "| outputs_s |",
                                                                                       "## Plots"))]

    assert kept(report) == kept(committed)


def test_a_simulated_sweeps_end_out_of_a_steady_state_round_trips() -> None:
    """A kept peak's ``unsteady`` step and a kept step's ``steady: false`` survive results.json, so
    the claims can tell a sweep that a transient ended (``okapikv.sim.experiments.steady``)."""
    peak = _run(sweep=[[48, 40.0], [96, 50.0]], unsteady=[192, 90.0, 1.45])
    step = _run(steady=False)
    for run in (peak, step):
        data = json.loads(json.dumps(run.to_dict()))
        assert Run.from_dict(data) == run
    assert peak.to_dict()["unsteady"] == [192, 90.0, 1.45] and "steady" not in peak.to_dict()
    assert step.to_dict()["steady"] is False and "unsteady" not in step.to_dict()
